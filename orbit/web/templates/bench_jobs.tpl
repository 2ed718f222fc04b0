% from urllib.parse import quote
<h1>Bench jobs</h1>
% if not jobs and not unreadable:
<p class="empty" id="no-jobs">No jobs yet: <code>orbit bench run</code> starts one (see docs/bench.md).</p>
% end
% if jobs:
<form method="get" action="/bench/compare" id="bench-compare-form">
<div class="actions"><button type="submit" id="bench-compare">Compare selected</button>
<span class="count">{{len(jobs)}} job{{'' if len(jobs) == 1 else 's'}}; compare up to {{jobs_max}}</span></div>
<div class="scroll"><table class="bench-jobs">
<tr><th></th><th>Job</th><th>Name</th><th>Folder</th><th>Benchmark</th><th>State</th><th>Done</th><th>Valid</th><th>Invalid</th><th>Not graded</th><th>Methods</th><th>Created</th></tr>
% for j in jobs:
<tr class="job" data-id="{{j['id']}}">
<td><input type="checkbox" name="jobs" value="{{j['id']}}" aria-label="select {{j['id']}}"></td>
<td><a href="/bench/jobs/{{j['id']}}">{{j['id']}}</a></td>
<td>{{j['name'] or ''}}</td>
% folder = j.get('folder') if isinstance(j.get('folder'), str) else None
<td class="folder">
% if folder:
<a href="/browse?folder={{quote(folder, safe='/')}}">{{folder}}/</a>
% end
</td>
<td>{{j['benchmark']}}</td>
<td class="state state-{{j['state']}}">{{j['state']}}</td>
<td>{{j['done']}}/{{j['trials']}}</td>
<td class="valid">{{j['valid']}}</td>
<td class="invalid">{{j['invalid']}}{{(' + %d unreadable' % len(j['unreadable'])) if j['unreadable'] else ''}}</td>
<td>{{j['unknown']}}</td>
<td>{{' '.join(m['name'] for m in j['methods'])}}</td>
<td class="time">{{!when(j['created_at'])}}</td>
</tr>
% end
</table></div>
</form>
% end
% if unreadable:
<h2>Jobs that cannot be read</h2>
<ul class="unreadable">
% for u in unreadable:
<li class="error" data-id="{{u['id']}}">{{u['problem']}}</li>
% end
</ul>
% end
