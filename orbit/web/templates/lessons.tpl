<h1>Lessons of {{heading}}</h1>
% states = ", ".join("%s %s" % (n, s) for s, n in d["states"].items())
<p id="lessons-summary">{{d["runs"]}} runs: {{states}}.
% if d["scope"].get("group"):
<a href="/?group={{q(d['scope']['group'], safe='')}}">the runs</a> · <a href="{{compare_href}}">every setting ranked</a>
% end
· <a href="/lessons">other groups</a>
</p>
% if d.get("unreadable"):
<p class="muted">{{d["unreadable"]}} more cannot be read.</p>
% end

<h2>Tried</h2>
% if d["params"]:
<table class="kv" id="lessons-tried">
% for key, values in d["params"].items():
<tr><th>{{key}}</th><td>{{", ".join("%s ×%d" % (v, c) for v, c in values.items()) if len(values) <= 10 else "%d values, %s … %s" % (len(values), list(values)[0], list(values)[-1])}}</td></tr>
% end
</table>
% else:
<p class="muted">No params recorded.</p>
% end

<h2>Best</h2>
% include("objective", oc=oc)
% if d["metric"]:
<div class="scroll"><table id="lessons-settings">
<thead><tr><th></th><th>setting</th><th>mean</th><th>± std</th><th>n</th><th>failed</th><th>its best run</th></tr></thead>
<tbody>
% for s in d["settings"]:
<tr class="{{'best' if s['best'] else ''}}">
  <td>{{"best" if s["best"] else ""}}</td>
  <td>{{params_text(s["params"])}}</td>
  <td>{{fmt(s["mean"])}}</td>
  <td>{{fmt(s["std"])}}</td>
  <td>{{s["n"]}} of {{s["runs"]}}</td>
  <td>{{s["failed"]}}</td>
  <td>{{!('<a href="/runs/%s">%s</a>' % (q(s["best_run"], safe=""), q(s["best_run"], safe=""))) if s["best_run"] else "-"}}</td>
</tr>
% end
</tbody></table></div>
% more = d.get("settings_total", 0) - len(d["settings"])
% if more > 0:
<p class="muted">{{more}} more settings.
% if compare_href:
<a href="{{compare_href}}">Every setting ranked</a>.
% end
</p>
% end
% b = d.get("best_run")
% if b:
<p id="lessons-best-run">Best single run: <a href="/runs/{{q(b['id'], safe='')}}">{{b["id"]}}</a> ({{params_text(b["params"])}}), {{d["metric"]}} {{fmt(b["value"])}}</p>
% end
% end

<h2>Failures</h2>
% if d["failures"]:
<div id="lessons-failures">
% for f in d["failures"]:
% shared = f.get("shared_params") or {}
% examples = f.get("run_ids") or []
<div class="note"><div class="note-meta">{{f.get("count")}}×{{(" · all " + params_text(shared)) if shared else ""}} · runs
% for i in examples[:3]:
<a href="/runs/{{q(str(i), safe='')}}">{{i}}</a>
% end
</div><div class="note-text"><code>{{f.get("signature")}}</code></div>
% outcome = f.get("outcome") or {}
% for line in outcome.get("lines") or []:
<p class="outcome outcome-{{outcome.get("status") or ""}}">{{line}}</p>
% end
</div>
% end
</div>
% else:
<p class="muted">None.</p>
% end

<h2>Notes <small>(newest first)</small></h2>
% if d["notes"]:
<div id="lessons-notes">
% for n in d["notes"]:
<div class="note"><div class="note-meta">{{!when(n.get("time"))}} · {{n.get("author") or ""}} ·
% if n.get("group"):
group {{n["group"]}}
% else:
runs
% for r in n.get("runs") or []:
<a href="/runs/{{q(str(r), safe='')}}#notes">{{r}}</a>
% end
% end
</div><div class="note-text md">{{!md(n.get("text"))}}</div></div>
% end
</div>
% else:
<p class="muted">No notes yet.</p>
% end

<details><summary>As text (what <code>orbit lessons</code> prints)</summary>
<pre id="lessons-text">{{text}}</pre>
</details>
