<h1>Resources</h1>
% if error:
<p class="error">Could not read the resources: {{error}}</p>
% else:
% src = {"fake": "stand-in", "nvml": "NVML", "none": "none found"}.get(data["gpu_source"], data["gpu_source"])
<h2>GPUs <small>({{src}})</small></h2>
% if data["gpus"]:
<div class="scroll"><table>
<thead><tr><th>index</th><th>name</th><th>memory</th><th>busy</th><th>holder</th><th>processes</th></tr></thead>
<tbody>
% for g in data["gpus"]:
<tr>
  <td>{{g["index"]}}</td><td>{{g["name"]}}</td>
  <td>{{"%.1f" % g["memory_used_gb"]}} / {{"%.1f" % g["memory_total_gb"]}} GiB</td>
  <td>{{"-" if g["utilization"] is None else "%s%%" % g["utilization"]}}</td>
  <td>{{g["holder"] or ("free" if g["allowed"] else "not allowed (ORBIT_GPUS)")}}</td>
  <td>{{", ".join("%s %s (%.1f GiB)" % (p["pid"], p["name"], p["memory_gb"]) for p in g["processes"]) or "-"}}</td>
</tr>
% end
</tbody></table></div>
% else:
<p>No GPUs.</p>
% end
% c, m = data["cpus"], data["memory"]
<h2>CPUs and memory</h2>
<table class="kv">
% off = "use outside Orbit not measured (count_outside_use: false)"
% cpu_out = off if not m["measured"] else "use outside Orbit not measured yet (first sample)"
% if c["outside"] is not None:
%   cpu_out = "%.1f busy outside Orbit (load %g)" % (c["outside"], c["load"])
% end
% mem_out = off if m["outside_gb"] is None else "%.1f GiB in use outside Orbit" % m["outside_gb"]
<tr><th>CPUs</th><td>{{"%g" % c["leased"]}} of {{"%g" % c["total"]}} leased, {{"%g" % c["free"]}} free; {{cpu_out}}</td></tr>
<tr><th>Memory</th><td>{{"%g" % m["leased_gb"]}} of {{"%g" % m["total_gb"]}} GiB leased, {{"%g" % m["free_gb"]}} GiB free; {{mem_out}}</td></tr>
</table>
<h2>Leases</h2>
% if data["leases"]:
<div class="scroll"><table>
<thead><tr><th>run</th><th>name</th><th>state</th><th>CPUs</th><th>memory</th><th>GPUs</th></tr></thead>
<tbody>
% for l in data["leases"]:
<tr><td><a href="/runs/{{l['id']}}">{{l["id"]}}</a></td><td>{{l["name"] or ""}}</td><td>{{l["state"]}}</td>
<td>{{"%g" % l["cpus"]}}</td><td>{{"%g" % l["mem_gb"]}} GiB</td><td>{{",".join(str(i) for i in l["gpus"]) or "-"}}</td></tr>
% end
</tbody></table></div>
% else:
<p>No leases.</p>
% end
<h2>Queue</h2>
% if data["queue"]:
<div class="scroll"><table>
<thead><tr><th>run</th><th>name</th><th>why it waits</th></tr></thead>
<tbody>
% for q in data["queue"]:
<tr><td><a href="/runs/{{q['id']}}">{{q["id"]}}</a></td><td>{{q["name"] or ""}}</td><td class="reason">{{q["reason"] or ""}}</td></tr>
% end
</tbody></table></div>
% else:
<p>The queue is empty.</p>
% end
<h2>Nodes</h2>
% if data["nodes"]:
% from orbit.human import human_seconds
<p class="muted">As last read (<code>orbit node ls</code> reads them now); a reading older than 15 s is read again in the background.</p>
<div class="scroll"><table class="nodes">
<thead><tr><th>node</th><th>state</th><th>read</th><th>Orbit</th><th>CPUs free</th><th>memory free</th><th>GPUs free</th><th>runs of this home</th><th>node's own runs</th></tr></thead>
<tbody>
% for n in data["nodes"]:
% free = n["free"]
% pair = lambda v, unit="": "-" if not v else "%g / %g%s" % (round(v[0], 1), round(v[1], 1), unit)
% there = n["runs"]["there"]
<tr class="node" data-node="{{n['name']}}">
  <td><b>{{n["name"]}}</b><br><small>{{n["url"]}}</small></td>
% if n["reachable"]:
  <td><span class="state state-succeeded">reachable</span></td>
% elif n["reachable"] is None:
  <td><span class="state state-unknown">never reached</span></td>
% else:
  <td><span class="state state-unknown">unreachable</span> <span class="reason">{{n.get("error") or ""}}</span></td>
% end
  <td>{{"never" if n["age_s"] is None else human_seconds(n["age_s"]) + " ago"}}</td>
  <td>{{n["version"] or "-"}}</td>
  <td>{{pair(free.get("cpus"))}}</td><td>{{pair(free.get("mem_gb"), " GiB")}}</td><td>{{pair(free.get("gpus"))}}</td>
  <td>
% for rid in n["runs"]["here"]:
<a href="/runs/{{rid}}">{{rid}}</a>
% end
{{"" if n["runs"]["here"] else "-"}}</td>
  <td>{{"%s active, %s queued" % (there.get("active", "-"), there.get("queued", "-")) if there else "-"}}</td>
</tr>
% end
</tbody></table></div>
% else:
<p>No other nodes (add one with <code>orbit node add NAME ssh://host</code>).</p>
% end
% for problem in data["problems"]:
<p class="error">{{problem}}</p>
% end
% end
