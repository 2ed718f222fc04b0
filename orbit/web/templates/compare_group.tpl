<h1>Settings of group {{group}}</h1>
<p id="group-links">{{len(ranked.runs)}} runs{{(", and %d that cannot be read" % ranked.unreadable) if ranked.unreadable else ""}}:
<a href="/?group={{q(group, safe='')}}">list them</a> · <a href="{{lessons_href}}">lessons</a> · <a href="/failures?group={{q(group, safe='')}}">failures</a></p>
% include("objective", oc=oc)
% if rows:
<p class="muted">Each setting is the runs' params without the seed-like keys ({{", ".join(seed_keys)}}); its score is the mean of the final value over its succeeded runs, ± the sample standard deviation. As <code>orbit best -g {{group}} --by-params</code>.</p>
<div class="scroll"><table id="settings">
<thead><tr><th></th><th>rank</th><th>setting</th><th>mean ± std</th><th title="succeeded runs with the metric / runs">n</th><th>failed</th><th>best run</th></tr></thead>
<tbody>
% for r in rows:
<tr class="{{'best' if r['best'] else ''}}">
  <td>{{"best" if r["best"] else ""}}</td>
  <td>{{r["rank"]}}</td>
  <td class="params">{{r["setting"]}}</td>
  <td>{{r["mean"]}}</td>
  <td>{{r["n"]}}</td>
  <td>{{r["failed"]}}</td>
% if r["best_run"]:
  <td><a href="/runs/{{q(r['best_run'], safe='')}}">{{r["best_run"]}}</a></td>
% else:
  <td>-</td>
% end
</tr>
% end
</tbody></table></div>
% if top:
<p id="best-setting">Best setting: <b>{{top["setting"]}}</b>, mean {{top["mean"]}} ({{top["n"]}} runs scored).</p>
% else:
<p id="best-setting">No setting has a succeeded run that logged {{ranked.objective.metric}}.</p>
% end
% end
% if chart_src:
<h2 id="group-charts">Every run of the group{{", mean ± std per setting" if rows else ""}}</h2>
% include("charts", src=chart_src)
% end
% if side_by_side:
% if rows:
<h2>The best run of each setting, side by side{{" (the first %d)" % len(side_by_side["runs"]) if len(side_by_side["runs"]) < sum(1 for r in rows if r["best_run"]) else ""}}</h2>
% else:
<h2>Runs side by side{{" (the first %d of %d)" % (len(side_by_side["runs"]), len(ranked.runs)) if len(side_by_side["runs"]) < len(ranked.runs) else ""}}</h2>
% end
% include("compare_runs", **side_by_side)
% end
