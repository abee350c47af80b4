"""Developer helper: build some or all Cython modules in place (into src/loopcore).

    python tools/build_inplace.py            # every src/_native/*.pyx
    python tools/build_inplace.py guard burn # only these

Several people can iterate on different .pyx files without one broken module
blocking the others' builds. `pip install -e .` remains the real install.
"""

import os
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
os.chdir(ROOT)
sys.path.insert(0, str(ROOT))

from setuptools import setup  # noqa: E402

import setup as loopcore_setup  # noqa: E402  (our setup.py; guarded by NO_EXTENSIONS)

only = sys.argv[1:] or None
setup(
    ext_modules=loopcore_setup.extensions(only),
    cmdclass={"build_ext": loopcore_setup.StrictBuildExt},
    script_args=[
        "build_ext",
        "--inplace",
        "--build-temp",
        f"build/tmp-{'-'.join(only or ['all'])}",
    ],
)
