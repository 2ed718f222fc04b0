<h1>Lessons</h1>
<p>What was tried in a group, what worked best and what failed: choose a group (or a project
below). The same digest as <code>orbit lessons -g GROUP</code>.</p>
% if groups:
<div class="scroll"><table id="lessons-groups">
<thead><tr><th>group</th><th>runs</th><th>states</th><th>declared objective</th><th>newest run</th><th></th></tr></thead>
<tbody>
% for g in groups:
% name = q(g["group"], safe="")
<tr>
  <td><a href="/lessons?group={{name}}">{{g["group"]}}</a></td>
  <td>{{g["runs"]}}</td>
  <td>{{g["states"]}}</td>
% if g["warning"]:
  <td class="warning">{{g["warning"]}}</td>
% elif g["objective"]:
  <td>{{g["objective"]}}</td>
% else:
  <td class="muted">none (picked from what the runs logged)</td>
% end
  <td><a href="/runs/{{q(g['newest'], safe='')}}">{{g["newest"]}}</a></td>
  <td><a href="/lessons?group={{name}}">lessons</a> · <a href="/compare?group={{name}}">settings</a> · <a href="/?group={{name}}">runs</a></td>
</tr>
% end
</tbody></table></div>
% else:
<p class="muted" id="no-groups">No run has a group yet: <code>orbit sweep -g GROUP …</code> or <code>orbit run -g GROUP …</code> makes one.</p>
% end
<h2>A project</h2>
<form class="filters" method="get" action="/lessons">
  <input name="project" placeholder="/path/to/repository" required>
  <button type="submit">Lessons of this project</button>
</form>
