"""The HTML report: one self-contained file a person opens to see where sessions went round.

``loopcore analyse --html FILE`` and ``loopcore replay --html FILE`` write it. What it holds:

* an overview that reads without JavaScript: total / wasted / ratio, what a guard would have
  blocked and saved, and bar charts (inline SVG) of the waste by finding kind, by tool and by
  target;
* every trace in one table, ranked by wasted tokens; with JavaScript the table sorts by any
  column, filters by format, finding kind and minimum ratio, and pages through any number of
  traces;
* per trace, on demand: a timeline of its steps (kind by colour, tokens as bar height, each
  step labelled with the trace's own coordinate), the steps each finding charged marked and
  linked to the step they repeat, the guard replay overlaid (where it would have warned or
  blocked and the tokens a block would have saved), the finding sentences and the top
  recommendation.

Traces are untrusted input. Every trace-derived string on the static part of the page goes
through :func:`html.escape`; the per-trace data travels as JSON inside a
``<script type="application/json">`` block with ``<``, ``>``, ``&`` and the JavaScript line
separators escaped, and the page's script builds the detail with ``textContent`` and
``createElement`` only (no ``innerHTML`` of data, no URL built from data), so a tool name such
as ``<script>`` or ``javascript:`` shows as the text it is. Control characters are replaced by
visible escapes (``\\x1b``) on both paths.

Size is bounded: a trace's timeline keeps at most :data:`TIMELINE_MAX_BARS` bars (longer traces
are folded into buckets that keep the largest step of each), a finding lists at most
:data:`MAX_STEPS_LISTED` charged steps, and strings are cut at :data:`MAX_TEXT` characters. So
the file grows linearly with the number of traces, at a few hundred bytes per trace, and a
report of 10,000 traces stays a few megabytes.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:  # pragma: no cover - typing only
    from .replay import ReplayReport
    from .report import AnalysisReport
    from .trace import Trace

__all__ = [
    "MAX_STEPS_LISTED",
    "MAX_TEXT",
    "TIMELINE_MAX_BARS",
    "HtmlCollector",
    "Timeline",
    "clean_text",
    "render_report",
    "timeline_of",
]

#: A timeline keeps at most this many bars; a longer trace is folded into equal buckets.
TIMELINE_MAX_BARS = 400
#: A finding names at most this many of its charged steps in the embedded data.
MAX_STEPS_LISTED = 50
#: Trace strings (targets, tool names, messages) are cut to this many characters.
MAX_TEXT = 300
#: Rows of the traces table rendered on the page itself (the rest are paged in by the script).
STATIC_ROWS = 100
#: Bars per chart (tools, targets).
CHART_BARS = 10

_KIND_CODE = {"observe": "o", "mutate": "m", "exec": "x", "ask": "a", "other": "t"}
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def clean_text(value: Any, limit: int = MAX_TEXT) -> str:
    """*value* as display text: control characters made visible (``\\x1b``), cut to *limit*."""
    if value is None:
        return ""
    if isinstance(value, (tuple, list)):
        s = ", ".join(str(v) for v in value)
    else:
        s = str(value)
    if len(s) > limit:
        s = s[: limit - 1] + "…"
    return _CONTROL.sub(
        lambda m: (
            f"\\x{ord(m.group()):02x}" if ord(m.group()) < 256 else f"\\u{ord(m.group()):04x}"
        ),
        s,
    )


def _ref_text(ref: Any) -> str:
    """A step's coordinate in its trace as a short label: ``messages[116]``, ``line 42``..."""
    if not ref:
        return ""
    if isinstance(ref, dict):
        parts = []
        for k, v in ref.items():
            if k == "message":
                parts.append(f"messages[{v}]")
            elif k == "line":
                parts.append(f"line {v}")
            elif k == "event":
                parts.append(f"event {v}")
            elif k == "file":
                parts.append(str(v))
            else:
                parts.append(f"{k} {v}")
        return clean_text(" ".join(parts), 120)
    return clean_text(ref, 120)


@dataclass(slots=True)
class Timeline:
    """What the timeline of one trace needs: per step its kind, tokens, tool and coordinate."""

    kinds: str
    tokens: list[int]
    names: list[str]
    refs: list[str]
    estimated: list[bool] = field(default_factory=list)


def timeline_of(trace: Trace) -> Timeline:
    """The :class:`Timeline` of *trace* (no trace object is kept)."""
    steps = trace.steps
    return Timeline(
        kinds="".join(_KIND_CODE.get(s.kind, "t") for s in steps),
        tokens=[s.tokens_in + s.tokens_out for s in steps],
        names=[s.name for s in steps],
        refs=[_ref_text(getattr(s, "ref", None)) for s in steps],
        estimated=[bool(s.tokens_estimated) for s in steps],
    )


class HtmlCollector:
    """An ``on_trace`` callback that keeps what the HTML report needs of each trace.

    ``collect`` and ``collect_replay`` call it once per trace, in the order of their results,
    so ``timelines[i]`` belongs to ``report.traces[i]``. With a *policy*, it also replays each
    trace through a fresh Guard of that preset for the overlay; with ``burn=True`` it runs the
    burn analysis too (``loopcore replay --html``, whose own report has no findings).
    """

    def __init__(self, *, policy: str | None = "default", burn: bool = False) -> None:
        self.policy = policy
        self.burn = burn
        self.timelines: list[Timeline] = []
        self.replays: list[Any] = []
        self.burns: list[Any] = []
        self._pol: Any = None
        if policy is not None:
            from .policy import Policy

            self._pol = Policy.preset(policy)

    def __call__(self, trace: Trace) -> None:
        self.timelines.append(timeline_of(trace))
        if self._pol is not None:
            import logging

            from .guard import Guard
            from .replay import replay_trace

            # The overlay lists the guard's events itself: keep Python's last-resort handler
            # from echoing each doom_loop_detected event to stderr.
            logger = logging.getLogger("loopcore")
            quiet = logging.NullHandler()
            logger.addHandler(quiet)
            try:
                self.replays.append(replay_trace(trace, Guard(policy=self._pol)))
            except (TypeError, ValueError):  # args the guard cannot hash: no overlay for this trace
                self.replays.append(None)
            finally:
                logger.removeHandler(quiet)
        if self.burn:
            from .burn import analyse_burn

            self.burns.append(analyse_burn(trace))


# ---------------------------------------------------------------------------------------------
# data for the page


def _fold(tl: Timeline) -> tuple[list[int], list[str], list[int], list[str]]:
    """Bars of a timeline: (first step of each bar, kind code, tokens, coordinate label).

    Up to TIMELINE_MAX_BARS steps are one bar each; a longer trace is cut into that many equal
    buckets and each bar shows the bucket's costliest step (its kind and coordinate) and the
    bucket's total tokens, so no waste disappears from the picture.
    """
    n = len(tl.kinds)
    if n <= TIMELINE_MAX_BARS:
        return list(range(n)), list(tl.kinds), list(tl.tokens), list(tl.refs)
    starts, kinds, toks, refs = [], [], [], []
    for b in range(TIMELINE_MAX_BARS):
        lo, hi = b * n // TIMELINE_MAX_BARS, (b + 1) * n // TIMELINE_MAX_BARS
        seg = tl.tokens[lo:hi]
        top = lo + max(range(len(seg)), key=seg.__getitem__)
        starts.append(lo)
        kinds.append(tl.kinds[top])
        toks.append(sum(seg))
        refs.append(tl.refs[top])
    return starts, kinds, toks, refs


def _finding_data(f: Any, tl: Timeline | None) -> dict[str, Any]:
    steps = list(f.steps)
    d: dict[str, Any] = {
        "kind": f.kind,
        "tokens": f.tokens,
        "of": f.of_step,
        "steps": steps[:MAX_STEPS_LISTED],
        "more": max(0, len(steps) - MAX_STEPS_LISTED),
        "target": clean_text(f.target),
        "name": clean_text(f.name, 80),
        "msg": clean_text(f.message, 600),
    }
    if tl is not None:
        d["of_ref"] = (
            tl.refs[f.of_step] if f.of_step is not None and 0 <= f.of_step < len(tl.refs) else ""
        )
        d["refs"] = [tl.refs[s] if 0 <= s < len(tl.refs) else "" for s in d["steps"]]
    return d


def _trace_data(i: int, t: Any, tl: Timeline | None, rp: Any) -> dict[str, Any]:
    r = t.report
    kinds: dict[str, int] = {}
    for f in r.findings:
        kinds[f.kind] = kinds.get(f.kind, 0) + f.tokens
    d: dict[str, Any] = {
        "i": i,
        "label": clean_text(t.label, 120),
        "source": clean_text(t.source, 200),
        "format": clean_text(t.format or "-", 40),
        "steps": t.steps,
        "total": r.total_tokens,
        "wasted": r.wasted_tokens,
        "ratio": round(r.waste_ratio, 4),
        "est": bool(r.tokens_estimated),
        "kinds": kinds,
        "rec": clean_text(r.top_recommendation or "", 600),
        "findings": [_finding_data(f, tl) for f in sorted(r.findings, key=lambda f: -f.tokens)],
    }
    if tl is not None:
        starts, k, toks, refs = _fold(tl)
        d["tl"] = {"s": starts, "k": "".join(k), "t": toks, "r": refs, "n": len(tl.kinds)}
    if rp is not None:
        d["guard"] = {
            "warned": rp.warned,
            "blocked": rp.blocked,
            "saved": rp.saved_tokens,
            "ev": [
                [
                    e.step,
                    e.action,
                    clean_text(e.detector or "", 40),
                    e.tokens,
                    clean_text(e.message, 400),
                ]
                for e in rp.events[: MAX_STEPS_LISTED * 4]
            ],
        }
    return d


def _json_for_script(data: Any) -> str:
    """JSON that is safe inside a ``<script type="application/json">`` element."""
    s = orjson.dumps(data, option=orjson.OPT_NON_STR_KEYS).decode("utf-8")
    return (
        s.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


# ---------------------------------------------------------------------------------------------
# static parts: summary and charts (no JavaScript needed)


def _fmt(n: int, est: bool = False) -> str:
    return f"{'~' if est and n else ''}{n:,}"


def _pct(r: float) -> str:
    return f"{r * 100:.1f}%"


def _svg_bars(title: str, rows: list[tuple[str, int]], cls: str) -> str:
    """A horizontal bar chart as inline SVG; *rows* are (label, tokens), largest first."""
    e = html.escape
    if not rows:
        return f'<figure class="chart {cls}"><figcaption>{e(title)}</figcaption><p class="muted">no waste</p></figure>'
    top = max(v for _, v in rows) or 1
    h = 22 * len(rows) + 6
    out = [
        f'<figure class="chart {cls}"><figcaption>{e(title)}</figcaption>',
        f'<svg viewBox="0 0 540 {h}" width="540" height="{h}" role="img" aria-label="{e(title)}">',
    ]
    for j, (label, v) in enumerate(rows):
        y = 4 + 22 * j
        w = max(1.0, 240.0 * v / top)
        lab = clean_text(label, 34)
        out.append(
            f'<g class="bar"><title>{e(clean_text(label))}: {v:,} tokens</title>'
            f'<text x="0" y="{y + 14}" class="lab">{e(lab)}</text>'
            f'<rect x="200" y="{y}" width="{w:.1f}" height="16" rx="2"></rect>'
            f'<text x="{200 + w + 4:.1f}" y="{y + 13}" class="val">{v:,}</text></g>'
        )
    out.append("</svg></figure>")
    return "".join(out)


def _waste_by(
    report: AnalysisReport,
) -> tuple[list[tuple[str, int]], list[tuple[str, int]], list[tuple[str, int]]]:
    kind: dict[str, int] = {}
    tool: dict[str, int] = {}
    target: dict[str, int] = {}
    for t in report.traces:
        for f in t.report.findings:
            kind[f.kind] = kind.get(f.kind, 0) + f.tokens
            tool[f.name or "-"] = tool.get(f.name or "-", 0) + f.tokens
            tg = clean_text(f.target) or "-"
            target[tg] = target.get(tg, 0) + f.tokens

    def top(d: dict[str, int]) -> list[tuple[str, int]]:
        return sorted(d.items(), key=lambda kv: (-kv[1], kv[0]))[:CHART_BARS]

    return top(kind), top(tool), top(target)


_CSS = """
:root{--obs:#4c8bf5;--mut:#f0a030;--exe:#8a63d2;--ask:#3aa17e;--oth:#9aa3ad;--waste:#d9534f;--warn:#e0a800}
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:1.5rem 2rem;color:#1d232a}
h1{font-size:1.35rem;margin:.2rem 0}h2{font-size:1.1rem;margin-top:1.6rem}h3{font-size:1rem;margin:.8rem 0 .3rem}
table{border-collapse:collapse;width:100%;margin:.5rem 0}
th,td{padding:.25rem .5rem;border-bottom:1px solid #e3e6ea;text-align:left;vertical-align:top}
th{background:#f4f6f8;white-space:nowrap}th.sortable{cursor:pointer}th.sortable:after{content:" \\2195";color:#9aa3ad}
td.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
tr.trace{cursor:pointer}tr.trace:hover{background:#f7f9fb}tr.sel{background:#eaf2ff}
.cards{display:flex;gap:1rem;flex-wrap:wrap;margin:.8rem 0}
.card{border:1px solid #e3e6ea;border-radius:6px;padding:.5rem .9rem;min-width:9rem}
.card b{display:block;font-size:1.25rem}.card span{color:#68737d;font-size:.85rem}
.charts{display:flex;gap:1.5rem;flex-wrap:wrap}.chart{margin:0}.chart figcaption{font-weight:600;margin-bottom:.2rem}
.chart rect{fill:var(--waste)}.chart .lab,.chart .val{font-size:12px;fill:#1d232a}
.rec{background:#fff7e0;border-left:4px solid #e0a800;padding:.5rem 1rem}
.muted{color:#68737d}.ratio{background:#e3e6ea;height:.5rem;width:5rem;display:inline-block;vertical-align:middle}
.ratio span{background:var(--waste);height:.5rem;display:block}
.filters{display:flex;gap:1rem;align-items:center;flex-wrap:wrap;margin:.5rem 0}
.pager{display:flex;gap:.6rem;align-items:center;margin:.4rem 0}
#detail{border-top:2px solid #9aa3ad;margin-top:1rem;padding-top:.5rem}
.tl{overflow-x:auto}.tl svg{display:block}
.k-o{fill:var(--obs)}.k-m{fill:var(--mut)}.k-x{fill:var(--exe)}.k-a{fill:var(--ask)}.k-t{fill:var(--oth)}
.mark-w{fill:var(--waste)}.mark-g-warn{fill:var(--warn)}.mark-g-block{fill:#1d232a}
.link{stroke:var(--waste);fill:none;stroke-width:1.2;opacity:.7}
.tick{font-size:10px;fill:#68737d}.tickline{stroke:#d0d5da;stroke-width:1}
.legend span{display:inline-block;margin-right:1rem}.legend i{display:inline-block;width:.8rem;height:.8rem;margin-right:.3rem;vertical-align:middle}
code{background:#f4f6f8;padding:0 .2rem;border-radius:3px}
noscript p{background:#f4f6f8;padding:.4rem .8rem}
"""


_JS = r"""
(function(){
"use strict";
var D=JSON.parse(document.getElementById("lc-data").textContent);
var T=D.traces, view=T.slice(), page=0, per=50, sortKey="wasted", sortDir=-1;
var KN={o:"observe",m:"mutate",x:"exec",a:"ask",t:"other"};
function el(tag,attrs,text){var e=document.createElement(tag);if(attrs){for(var k in attrs){if(k==="cls")e.className=attrs[k];else e.setAttribute(k,attrs[k]);}}if(text!==undefined&&text!==null)e.textContent=String(text);return e;}
function svg(tag,attrs){var e=document.createElementNS("http://www.w3.org/2000/svg",tag);for(var k in attrs)e.setAttribute(k,attrs[k]);return e;}
function fmt(n,est){return (est&&n?"~":"")+Number(n).toLocaleString("en-US");}
function pct(r){return (r*100).toFixed(1)+"%";}
function topKind(t){var best=null,v=-1;for(var k in t.kinds){if(t.kinds[k]>v){v=t.kinds[k];best=k;}}return best||"-";}
var body=document.getElementById("traces-body"), info=document.getElementById("page-info");
function bar(r){var s=el("span",{cls:"ratio"});var i=el("span");i.style.width=(Math.max(0,Math.min(1,r))*100).toFixed(1)+"%";s.appendChild(i);return s;}
function row(t){
  var tr=el("tr",{cls:"trace","data-i":t.i});
  tr.appendChild(el("td",null,t.label));
  tr.appendChild(el("td",null,t.format));
  tr.appendChild(el("td",{cls:"n"},fmt(t.steps)));
  tr.appendChild(el("td",{cls:"n"},fmt(t.total,t.est)));
  tr.appendChild(el("td",{cls:"n"},fmt(t.wasted,t.est)));
  var r=el("td",{cls:"n"},pct(t.ratio)+" ");r.appendChild(bar(t.ratio));tr.appendChild(r);
  tr.appendChild(el("td",null,topKind(t)));
  tr.appendChild(el("td",{cls:"n"},t.guard?(t.guard.blocked+" / "+t.guard.warned):"-"));
  tr.addEventListener("click",function(){show(t.i);});
  return tr;
}
function render(){
  while(body.firstChild)body.removeChild(body.firstChild);
  var pages=Math.max(1,Math.ceil(view.length/per));if(page>=pages)page=pages-1;
  var lo=page*per, hi=Math.min(view.length,lo+per);
  for(var j=lo;j<hi;j++)body.appendChild(row(view[j]));
  info.textContent=view.length?("traces "+(lo+1)+"-"+hi+" of "+view.length.toLocaleString("en-US")+(view.length<T.length?" (filtered from "+T.length.toLocaleString("en-US")+")":"")):"no trace matches the filters";
  document.getElementById("prev").disabled=page<=0;document.getElementById("next").disabled=page>=pages-1;
}
function apply(){
  var f=document.getElementById("f-format").value,k=document.getElementById("f-kind").value,m=parseFloat(document.getElementById("f-ratio").value)||0;
  view=T.filter(function(t){return (!f||t.format===f)&&(!k||(t.kinds[k]||0)>0)&&t.ratio*100>=m;});
  view.sort(function(a,b){var x=a[sortKey],y=b[sortKey];if(sortKey==="kind"){x=topKind(a);y=topKind(b);}if(x<y)return -sortDir;if(x>y)return sortDir;return a.i-b.i;});
  page=0;render();
}
Array.prototype.forEach.call(document.querySelectorAll("th[data-sort]"),function(th){th.classList.add("sortable");th.addEventListener("click",function(){var k=th.getAttribute("data-sort");if(sortKey===k)sortDir=-sortDir;else{sortKey=k;sortDir=(k==="label"||k==="format"||k==="kind")?1:-1;}apply();});});
["f-format","f-kind","f-ratio"].forEach(function(id){var e=document.getElementById(id);e.addEventListener("input",apply);e.addEventListener("change",apply);});
document.getElementById("prev").addEventListener("click",function(){page--;render();});
document.getElementById("next").addEventListener("click",function(){page++;render();});
document.getElementById("filters").hidden=false;document.getElementById("pager").hidden=false;
function timeline(t,host){
  var tl=t.tl;if(!tl){host.appendChild(el("p",{cls:"muted"},"no timeline recorded for this trace"));return;}
  var n=tl.k.length,bw=Math.max(3,Math.min(14,Math.floor(1100/Math.max(n,1)))),W=Math.max(n*bw+20,260),H=170,base=110;
  var mx=1;for(var j=0;j<n;j++)if(tl.t[j]>mx)mx=tl.t[j];
  var s=svg("svg",{width:W,height:H,viewBox:"0 0 "+W+" "+H,"class":"timeline",role:"img"});
  var charged={},linkOf={};(t.findings||[]).forEach(function(f){f.steps.forEach(function(st){charged[st]=f;});});
  var barOf=function(step){var lo=0,hi=n-1;while(lo<hi){var mid=(lo+hi+1)>>1;if(tl.s[mid]<=step)lo=mid;else hi=mid-1;}return lo;};
  var wasteBars={},guardBars={};
  for(var st in charged){wasteBars[barOf(+st)]=charged[st];}
  if(t.guard)t.guard.ev.forEach(function(ev){var b=barOf(ev[0]);if(!guardBars[b]||ev[1]==="block")guardBars[b]=ev;});
  for(var j=0;j<n;j++){
    var h=Math.max(2,Math.round(90*Math.sqrt(tl.t[j]/mx))),x=10+j*bw;
    var r=svg("rect",{x:x,y:base-h,width:Math.max(1,bw-1),height:h,"class":"step k-"+tl.k[j],"data-step":tl.s[j]});
    var tt=svg("title",{});var lab="step "+tl.s[j]+(tl.r[j]?" ("+tl.r[j]+")":"")+": "+KN[tl.k[j]]+", "+tl.t[j].toLocaleString("en-US")+" tokens";
    if(wasteBars[j])lab+="; charged as "+wasteBars[j].kind+" of step "+wasteBars[j].of+(wasteBars[j].of_ref?" ("+wasteBars[j].of_ref+")":"");
    if(guardBars[j])lab+="; guard would "+guardBars[j][1]+" ("+guardBars[j][2]+")";
    tt.textContent=lab;r.appendChild(tt);s.appendChild(r);
    if(wasteBars[j]){s.appendChild(svg("rect",{x:x,y:base+4,width:Math.max(1,bw-1),height:6,"class":"mark-w waste-mark","data-step":tl.s[j]}));
      var ob=barOf(wasteBars[j].of);var x0=10+ob*bw+bw/2,x1=x+bw/2;if(x1>x0){s.appendChild(svg("path",{d:"M"+x0+" "+(base+12)+" Q"+((x0+x1)/2)+" "+(base+40)+" "+x1+" "+(base+12),"class":"link"}));}}
    if(guardBars[j]){var gx=x+bw/2;s.appendChild(svg("path",{d:"M"+(gx-4)+" 8 L"+(gx+4)+" 8 L"+gx+" 16 Z","class":"guard-mark mark-g-"+guardBars[j][1],"data-step":tl.s[j]}));}
  }
  // Coordinates under the axis: about ten labels, each the trace's own place of that step.
  var every=Math.max(1,Math.ceil(n*bw/110));
  for(var j=0;j<n;j+=every){var lx=10+j*bw;var lt=svg("text",{x:lx,y:H-4,"class":"tick"});lt.textContent=tl.r[j]||("step "+tl.s[j]);s.appendChild(lt);s.appendChild(svg("line",{x1:lx+bw/2,y1:base+1,x2:lx+bw/2,y2:H-16,"class":"tickline"}));}
  var wrap=el("div",{cls:"tl"});wrap.appendChild(s);host.appendChild(wrap);
  if(tl.n>n)host.appendChild(el("p",{cls:"muted"},tl.n.toLocaleString("en-US")+" steps folded into "+n+" bars: each bar is a bucket, shown by its costliest step"));
}
function show(i){
  var t=T[i],host=document.getElementById("detail");while(host.firstChild)host.removeChild(host.firstChild);
  Array.prototype.forEach.call(document.querySelectorAll("tr.sel"),function(r){r.classList.remove("sel");});
  var tr=document.querySelector('tr.trace[data-i="'+i+'"]');if(tr)tr.classList.add("sel");
  host.appendChild(el("h2",null,"Trace: "+t.label));
  host.appendChild(el("p",{cls:"muted"},t.source+" ("+t.format+"), "+fmt(t.steps)+" steps, "+fmt(t.wasted,t.est)+" of "+fmt(t.total,t.est)+" tokens wasted ("+pct(t.ratio)+")"));
  if(t.guard)host.appendChild(el("p",null,"Guard replay ("+D.policy+" policy): "+t.guard.blocked+" block(s), "+t.guard.warned+" warning(s); blocks would have saved "+fmt(t.guard.saved,t.est)+" tokens."));
  if(t.rec){var p=el("p",{cls:"rec"});p.appendChild(el("strong",null,"Top recommendation: "));p.appendChild(document.createTextNode(t.rec));host.appendChild(p);}
  host.appendChild(el("h3",null,"Timeline"));timeline(t,host);
  host.appendChild(el("h3",null,"Findings"));
  if(!t.findings.length)host.appendChild(el("p",null,"No waste found in this trace."));
  else{var tb=el("table",{cls:"findings"});var hd=el("tr");["tokens","kind","target","charged steps","repeats","what happened"].forEach(function(h){hd.appendChild(el("th",null,h));});tb.appendChild(hd);
    t.findings.forEach(function(f){var r=el("tr",{cls:"finding"});r.appendChild(el("td",{cls:"n"},fmt(f.tokens,t.est)));r.appendChild(el("td",null,f.kind));r.appendChild(el("td",null,f.target||f.name));
      var cs=f.steps.map(function(s,j){return s+(f.refs&&f.refs[j]?" ("+f.refs[j]+")":"");}).join(", ")+(f.more?" and "+f.more+" more":"");
      r.appendChild(el("td",null,cs));r.appendChild(el("td",null,f.of+(f.of_ref?" ("+f.of_ref+")":"")));r.appendChild(el("td",null,f.msg));tb.appendChild(r);});
    host.appendChild(tb);}
  if(t.guard&&t.guard.ev.length){host.appendChild(el("h3",null,"Where the guard would have stepped in"));var gt=el("table",{cls:"guard"});var gh=el("tr");["step","action","detector","tokens","message"].forEach(function(h){gh.appendChild(el("th",null,h));});gt.appendChild(gh);
    t.guard.ev.forEach(function(ev){var r=el("tr",{cls:"gev gev-"+ev[1]});r.appendChild(el("td",{cls:"n"},ev[0]));r.appendChild(el("td",null,ev[1]));r.appendChild(el("td",null,ev[2]));r.appendChild(el("td",{cls:"n"},fmt(ev[3],t.est)));r.appendChild(el("td",null,ev[4]));gt.appendChild(r);});host.appendChild(gt);}
  host.scrollIntoView();
}
window.loopcoreShow=show;
apply();
if(T.length&&T[0].wasted>0){var best=T.slice().sort(function(a,b){return b.wasted-a.wasted||a.i-b.i;})[0];show(best.i);window.scrollTo(0,0);}
document.body.setAttribute("data-ready","1");
})();
"""


def render_report(
    report: AnalysisReport,
    *,
    timelines: list[Timeline] | None = None,
    replays: list[Any] | None = None,
    policy: str | None = None,
    title: str | None = None,
    min_ratio: float = 0.0,
    top: int = 10,
) -> str:
    """The report as one self-contained HTML page (inline CSS, SVG and script; no network).

    *timelines* and *replays* (from an :class:`HtmlCollector`) line up with ``report.traces``;
    either may be None, and then the page shows no timeline or no guard overlay.
    """
    from . import __version__

    e = html.escape
    o = report.overall
    traces = report.traces
    n = len(traces)
    what = "the bundled example trace" if report.example else f"{n:,} trace{'s' if n != 1 else ''}"
    title = title or f"loopcore burn analysis of {what}"
    data = [
        _trace_data(
            i,
            t,
            timelines[i] if timelines and i < len(timelines) else None,
            replays[i] if replays and i < len(replays) else None,
        )
        for i, t in enumerate(traces)
    ]
    blocked = sum(d["guard"]["blocked"] for d in data if "guard" in d)
    warned = sum(d["guard"]["warned"] for d in data if "guard" in d)
    saved = sum(d["guard"]["saved"] for d in data if "guard" in d)
    by_kind, by_tool, by_target = _waste_by(report)
    est = o.tokens_estimated
    min_pct = round(max(0.0, min(1.0, min_ratio)) * 100, 2)
    out: list[str] = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        # No network at all: the page loads nothing from anywhere, even if a string slipped through.
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">",
        f"<title>{e(title)}</title>",
        f"<style>{_CSS}</style></head><body>",
        f"<h1>{e(title)}</h1>",
        '<section id="summary"><div class="cards">',
        f'<div class="card"><b id="total-tokens">{_fmt(o.total_tokens, est)}</b><span>tokens in {report.steps:,} steps</span></div>',
        f'<div class="card"><b id="wasted-tokens">{_fmt(o.wasted_tokens, est)}</b><span>tokens wasted</span></div>',
        f'<div class="card"><b id="waste-ratio">{_pct(o.waste_ratio)}</b><span>waste ratio</span></div>',
    ]
    if replays:
        out.append(
            f'<div class="card"><b id="guard-saved">{_fmt(saved, est)}</b><span>tokens a guard ({e(policy or "default")}) '
            f"would have saved: {blocked:,} block(s), {warned:,} warning(s)</span></div>"
        )
    out.append("</div>")
    if o.top_recommendation:
        out.append(
            f'<p class="rec"><strong>Top recommendation:</strong> {e(clean_text(o.top_recommendation, 600))}</p>'
        )
    out.append('<div class="charts">')
    out.append(_svg_bars("Waste by finding kind", by_kind, "by-kind"))
    out.append(_svg_bars("Waste by tool", by_tool, "by-tool"))
    out.append(_svg_bars("Waste by target", by_target, "by-target"))
    out.append("</div>")
    findings = report.top_findings(top)
    if findings:
        total = sum(len(t.report.findings) for t in traces)
        out.append(
            f"<h2>Top {len(findings)} finding{'s' if len(findings) != 1 else ''} (of {total:,})</h2>"
            '<table id="top-findings"><thead><tr><th>tokens</th><th>kind</th><th>target</th><th>trace</th>'
            "<th>what happened</th></tr></thead><tbody>"
        )
        for t, f in findings:
            out.append(
                f'<tr><td class="n">{_fmt(f.tokens, f.tokens_estimated)}</td><td>{e(f.kind)}</td>'
                f"<td>{e(clean_text(f.target) or clean_text(f.name))}</td><td>{e(clean_text(t.label, 120))}</td>"
                f"<td>{e(clean_text(f.message, 2000))}</td></tr>"
            )
        out.append("</tbody></table>")
    elif traces:
        from .report import no_findings_note

        out.append(f"<p>{e(no_findings_note(report))}</p>")
    out.append("</section>")
    if est:
        from .report import estimate_note

        out.append(f'<p class="muted">{e(estimate_note(o))}</p>')

    formats = sorted({d["format"] for d in data})
    kinds = [k for k, _ in by_kind]
    out.append('<section id="traces"><h2>Traces, most waste first</h2>')
    out.append(
        '<div class="filters" id="filters" hidden><label>format <select id="f-format"><option value="">all</option>'
    )
    out.extend(f'<option value="{e(f)}">{e(f)}</option>' for f in formats)
    out.append(
        '</select></label><label>finding kind <select id="f-kind"><option value="">any</option>'
    )
    out.extend(f'<option value="{e(k)}">{e(k)}</option>' for k in kinds)
    out.append(
        f'</select></label><label>min ratio % <input id="f-ratio" type="number" min="0" max="100" step="1" value="{min_pct:g}" size="4"></label></div>'
    )
    out.append(
        '<div class="pager" id="pager" hidden><button id="prev" type="button">&larr; previous</button>'
        '<span id="page-info"></span><button id="next" type="button">next &rarr;</button></div>'
    )
    out.append(
        '<table id="traces-table"><thead><tr><th data-sort="label">trace</th><th data-sort="format">format</th>'
        '<th data-sort="steps">steps</th><th data-sort="total">tokens</th><th data-sort="wasted">wasted</th>'
        '<th data-sort="ratio">ratio</th><th data-sort="kind">top kind</th><th>guard blocks / warns</th></tr></thead>'
        '<tbody id="traces-body">'
    )
    ranked = sorted(data, key=lambda d: (-d["wasted"], d["i"]))
    for d in ranked[:STATIC_ROWS]:
        pct = max(0.0, min(1.0, d["ratio"])) * 100
        top_kind = max(d["kinds"].items(), key=lambda kv: kv[1])[0] if d["kinds"] else "-"
        g = d.get("guard")
        out.append(
            f'<tr class="trace" data-i="{d["i"]}"><td>{e(d["label"])}</td><td>{e(d["format"])}</td>'
            f'<td class="n">{d["steps"]:,}</td><td class="n">{_fmt(d["total"], d["est"])}</td>'
            f'<td class="n">{_fmt(d["wasted"], d["est"])}</td>'
            f'<td class="n">{_pct(d["ratio"])} <span class="ratio"><span style="width:{pct:.1f}%"></span></span></td>'
            f'<td>{e(top_kind)}</td><td class="n">{(str(g["blocked"]) + " / " + str(g["warned"])) if g else "-"}</td></tr>'
        )
    out.append("</tbody></table>")
    if n > STATIC_ROWS:
        out.append(
            f"<noscript><p>{STATIC_ROWS} of {n:,} traces shown; the full list, sorting, filters and the "
            "per-trace timelines need JavaScript (or use loopcore analyse --json).</p></noscript>"
        )
    else:
        out.append(
            "<noscript><p>Per-trace timelines need JavaScript; the figures above are complete.</p></noscript>"
        )
    out.append("</section>")
    out.append(
        '<p class="legend muted">Timeline: <span><i style="background:#4c8bf5"></i>observe</span>'
        '<span><i style="background:#f0a030"></i>mutate</span><span><i style="background:#8a63d2"></i>exec</span>'
        '<span><i style="background:#3aa17e"></i>ask</span><span><i style="background:#9aa3ad"></i>other</span>'
        '<span><i style="background:#d9534f"></i>charged as waste (arc: the step it repeats)</span>'
        '<span><i style="background:#e0a800"></i>guard warning</span><span><i style="background:#1d232a"></i>guard block</span></p>'
    )
    out.append('<section id="detail"></section>')
    if report.skipped:
        out.append(f"<h2>Skipped inputs ({len(report.skipped)})</h2><ul>")
        out.extend(
            f"<li>{e(clean_text(s.where()))}: {e(clean_text(s.message, 600))}</li>"
            for s in report.skipped[:200]
        )
        out.append("</ul>")
    payload = {"policy": policy or "default", "traces": data}
    out.append(f'<script type="application/json" id="lc-data">{_json_for_script(payload)}</script>')
    out.append(f"<script>{_JS}</script>")
    out.append(f'<p class="muted">loopcore {e(__version__)}</p></body></html>')
    return "\n".join(out) + "\n"


def replay_as_analysis(replay: ReplayReport, burns: Iterable[Any]) -> AnalysisReport:
    """An AnalysisReport for ``loopcore replay --html``: the replay's traces with their burn reports."""
    from .burn import BurnReport
    from .report import AnalysisReport, TraceResult

    results = [
        TraceResult(source=t.source, session=t.session, format=t.format, steps=t.steps, report=b)
        for t, b in zip(replay.traces, burns)
    ]
    return AnalysisReport(
        results,
        BurnReport.combine([r.report for r in results]),
        list(replay.skipped),
        inputs=list(replay.inputs),
        example=replay.example,
    )
