# The offsets of a slots class's own object slots, so the compiled side can read or fill an
# instance of an exact project class (Step, Decision) with plain loads and stores instead of
# attribute lookups. Shared by every module that does so: one check of what makes a slot safe.
from cpython.object cimport PyObject, PyTypeObject


cdef extern from "Python.h":
    ctypedef struct PyMemberDef:
        int member_type "type"
        Py_ssize_t offset
        int flags
    ctypedef struct PyMemberDescrObject:
        PyMemberDef* d_member
        PyTypeObject* d_type "d_common.d_type"
    PyTypeObject PyMemberDescr_Type
    int T_OBJECT_EX


cdef inline bint slot_offsets(type cls, tuple names, Py_ssize_t* out) except -1:
    # True, with out[i] the offset of names[i], when every name is a writable object slot
    # (T_OBJECT_EX) that *cls* itself declares; False (out left partly written) otherwise.
    cdef Py_ssize_t i
    cdef PyMemberDef* md
    cdef PyObject* d
    for i in range(len(names)):
        descr = cls.__dict__.get(names[i])
        if descr is None:
            return False
        d = <PyObject*>descr
        if d.ob_type is not &PyMemberDescr_Type:
            return False
        if (<PyMemberDescrObject*>d).d_type is not <PyTypeObject*>cls:
            return False
        md = (<PyMemberDescrObject*>d).d_member
        if md.member_type != T_OBJECT_EX or md.flags != 0:
            return False
        if md.offset < <Py_ssize_t>sizeof(PyObject):
            return False
        out[i] = md.offset
    return True
