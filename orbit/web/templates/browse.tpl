% from urllib.parse import quote
% from orbit.human import ago
<h1 class="crumbs"><a href="/browse">Folders</a>
% for path, name in crumbs:
 / <a href="/browse?folder={{quote(path, safe='/')}}">{{name}}</a>
% end
</h1>
% if folder and runs_under:
<p><a href="/?folder={{quote(folder, safe='/')}}">All {{runs_under}} run{{'' if runs_under == 1 else 's'}} under {{folder}}/ in the runs list</a> (with its subfolders).</p>
% end
% if children:
<h2>Folders</h2>
<div class="scroll"><table class="folders">
<thead><tr><th>folder</th><th>runs</th><th>filed here</th><th>bench jobs</th></tr></thead>
<tbody>
% for c in children:
<tr class="folder" data-path="{{c.path}}">
  <td><a href="/browse?folder={{quote(c.path, safe='/')}}">{{c.path.rsplit("/", 1)[-1]}}/</a></td>
  <td>{{c.runs}}</td><td>{{c.direct}}</td><td>{{c.jobs}}</td>
</tr>
% end
</tbody></table></div>
% elif not folder:
<p class="empty">No folders yet: file runs with <code>orbit run --folder PATH</code>, bench jobs with <code>orbit bench run --folder PATH</code>, or move them with <code>orbit mv ID… PATH</code>.</p>
% end
<h2>Bench jobs {{'in ' + folder + '/' if folder else 'at the top level'}}</h2>
% if jobs:
<div class="scroll"><table class="bench-jobs">
<thead><tr><th>job</th><th>name</th><th>benchmark</th><th>state</th><th>tasks</th><th>methods</th><th>created</th></tr></thead>
<tbody>
% for j in jobs:
<tr class="job" data-id="{{j['id']}}">
  <td><a href="/bench/jobs/{{j['id']}}">{{j['id']}}</a></td><td>{{j['name'] or ''}}</td><td>{{j['benchmark']}}</td>
  <td class="state state-{{j['state']}}">{{j['state']}}</td><td>{{j['tasks']}}</td>
  <td>{{' '.join(str(m) for m in j['methods'])}}</td>
  <td class="time"><time datetime="{{j['created_at']}}" title="{{j['created_at']}}">{{ago(str(j['created_at'] or ''))}}</time></td>
</tr>
% end
</tbody></table></div>
% else:
<p class="muted">None.</p>
% end
<h2>Runs {{'filed in ' + folder + '/' if folder else 'at the top level'}} <small>({{runs_total}}{{', the newest %d shown' % len(runs) if len(runs) < runs_total else ''}})</small></h2>
% if runs:
<div class="scroll"><table class="runs">
<thead><tr><th>run</th><th>name</th><th>state</th><th>group</th><th>submitted</th></tr></thead>
<tbody>
% for r in runs:
<tr class="run" data-id="{{r.get('id')}}">
  <td><a href="/runs/{{r.get('id')}}">{{r.get("id")}}</a></td><td>{{r.get("name") or ""}}</td>
  <td><span class="state state-{{r.get('state')}}">{{r.get("state")}}</span></td>
  <td>{{r.get("group") or ""}}</td>
  <td class="time"><time datetime="{{r.get('submitted_at') or ''}}" title="{{r.get('submitted_at') or ''}}">{{ago(str(r.get("submitted_at") or ""))}}</time></td>
</tr>
% end
</tbody></table></div>
% else:
<p class="muted">None.</p>
% end
