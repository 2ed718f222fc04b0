<h1>{{heading}}</h1>
% for rec in cmp.jobs:
%   s = rec.summary()
<p class="job-summary" data-id="{{s['id']}}">Job <a href="/bench/jobs/{{s['id']}}">{{s['id']}}</a>{{(' (%s)' % s['name']) if s['name'] else ''}}:
benchmark {{s['benchmark']}}, <span class="state state-{{s['state']}}">{{s['state']}}</span>;
{{s['valid']}} valid, {{s['invalid']}} invalid, {{s['unknown']}} not graded of {{s['trials']}} trials, {{s['seeds']}} seed{{'' if s['seeds'] == 1 else 's'}}</p>
%   if rec.unreadable:
<ul class="unreadable">
%     for u in rec.unreadable:
<li class="error unreadable-trial">Unreadable trial file <code>{{u.file}}</code>: {{u.problem}}</li>
%     end
</ul>
%   end
% end
% if not cmp.tasks:
<p class="empty">No trials yet.</p>
% else:
<p class="muted">Score: the mean over seeds of the valid trials ± their sample standard deviation (n); invalid trials are listed with their reason and never counted.</p>
<div class="scroll"><table class="matrix">
<tr><th>Task</th>
%   for c in cmp.columns:
<th title="{{c.agent or ''}}">{{c.label}}</th>
%   end
</tr>
%   for task in cmp.tasks:
<tr class="task" data-task="{{task}}"><th>{{task}}</th>
%     for c in cmp.columns:
%       cell = cmp.cell(task, c.label)
<td class="cell" data-method="{{c.label}}"><div class="score">{{cell_text(cell)}}</div>
%       if cell.trials:
<ul class="trials">
%         for tr in cell.trials:
%           t = trial_json(tr)
<li class="trial ev-{{t['evaluation']}}" data-trial="{{t['id']}}" title="{{t['reason'] or ''}}">seed {{t['seed']}}:
%           if t['evaluation'] == 'valid':
<b class="trial-score">{{fmt_metric(t['score'])}}</b>
%           elif t['evaluation'] == 'invalid':
<details class="why"><summary>invalid</summary><span class="reason">{{t['reason']}}</span>{{(' · solve ' + t['execution']) if t['execution'] else ''}}</details>
%           else:
<span class="muted">{{t['phase']}}</span>
%           end
%           if run_link(t['runs']['solve']):
<a class="solve" href="/runs/{{t['runs']['solve']}}">solve {{t['runs']['solve']}}</a>
%           end
%           if t['runs']['verify'] and run_link(t['runs']['verify'][-1]):
<a class="verify" href="/runs/{{t['runs']['verify'][-1]}}">verify {{t['runs']['verify'][-1]}}</a>
%           end
</li>
%         end
</ul>
%       end
</td>
%     end
</tr>
%   end
</table></div>
<h2>Paired means</h2>
<p id="paired-summary">Over {{len(cmp.paired_tasks)}} of {{len(cmp.tasks)}} task{{'' if len(cmp.tasks) == 1 else 's'}}: those with a valid trial for every method shown.</p>
<div class="scroll"><table class="paired kv">
<tr><th>Method</th><th>Paired mean</th><th>Valid trials</th><th>Invalid</th><th>Not graded</th><th>Tasks with a valid trial</th></tr>
%   for c in cmp.columns:
%     n = cmp.totals(c.label)
<tr data-method="{{c.label}}"><th>{{c.label}}</th><td class="paired-mean">{{paired_text(cmp, c.label) if cmp.paired_tasks else '-'}}</td><td>{{n['valid']}}</td><td>{{n['invalid']}}</td><td>{{n['unknown']}}</td><td>{{n['tasks_valid']}}/{{len(cmp.tasks)}}</td></tr>
%   end
</table></div>
%   if cmp.left_out:
<p>Left out:</p>
<ul class="left-out">
%     for task, why in cmp.left_out:
<li data-task="{{task}}"><b>{{task}}</b>: {{why}}</li>
%     end
</ul>
%   end
% end
