<link rel="stylesheet" href="/static/run.css">
<div class="run-page" id="run-page" data-run="{{run.id}}" data-active="{{'0' if run.state.finished else '1'}}"
     data-log-start="{{log['start']}}" data-log-next="{{log['next_offset']}}"
     data-log-partial="{{'1' if log['partial'] else '0'}}" data-log-counted="{{'0' if log['first_line'] is None else '1'}}">
<h1>Run {{run.id}}{{' · ' + info['name'] if info['name'] else ''}}
  <span class="state state-{{info['state']}}" id="run-state">{{info['state']}}</span></h1>
% if info['reason']:
<p class="reason" id="run-reason">{{info['reason']}}</p>
% end
% if node is not None:
<p class="node-where" id="run-node">{{'Ran' if run.state.finished else 'Runs'}} {{node.where}}.</p>
% end
% if error_lines:
<div class="error-tail" id="run-error"><div class="muted">From the end of its log:</div>
<pre class="log">{{!error_html}}</pre></div>
% end
% if not run.state.finished:
<form method="post" action="/cancel" id="run-cancel" class="run-cancel">
  <input type="hidden" name="token" value="{{csrf}}">
  <input type="hidden" name="ids" value="{{run.id}}">
  <input type="hidden" name="back" value="/runs/{{run.id}}">
  <button type="submit" class="danger">Cancel run</button>
</form>
% end
<nav class="run-tabs">
  <a href="#overview">Overview</a> <a href="#logs">Logs</a> <a href="#metrics">Metrics</a>
  <a href="#artifacts">Artifacts</a> <a href="#diff">Code diff</a> <a href="#notes">Notes</a>
  <a href="#session">Agent session</a> <a href="#events">Events</a>
  <a href="/compare?ids={{run.id}}">Compare…</a>
</nav>

<section id="overview">
<h2>Overview</h2>
<div class="run-grid">
<table class="kv">
  <tr><th>name</th><td>{{info['name'] or ''}}</td></tr>
  <tr><th>group</th><td>{{info['group'] or ''}}{{!(' <a href="/lessons?group=' + q(info['group'], safe='') + '">lessons</a>') if info['group'] else ''}}</td></tr>
  <tr><th>folder</th><td>{{info['folder'] or ''}}</td></tr>
  <tr><th>state</th><td><span class="state state-{{info['state']}}">{{info['state']}}</span></td></tr>
  <tr><th>reason</th><td>{{info['reason'] or ''}}</td></tr>
  <tr><th>exit code</th><td>{{'' if info['exit_code'] is None else info['exit_code']}}{{' (killed for memory)' if info['oom_killed'] else ''}}</td></tr>
  <tr><th>image</th><td><code>{{info['image'] or ''}}</code></td></tr>
  <tr><th>command</th><td><code>{{' '.join(str(c) for c in info['command'])}}</code></td></tr>
  % proj = info['project']
  % if proj:
  <tr><th>project</th><td>{{proj.get('mode', '')}} {{proj.get('path') or ''}} <code>{{(proj.get('commit') or '')[:12]}}</code>{{' (dirty)' if proj.get('dirty') else ''}}</td></tr>
  % end
  % for i, use in enumerate(u for u in info['datasets'] if isinstance(u, dict)):
  <tr><th>{{'datasets' if i == 0 else ''}}</th><td>{{use.get('name')}} at <code>{{use.get('target')}}</code> ({{'read-write' if use.get('rw') else 'read-only'}}; <code>{{use.get('path')}}</code>)</td></tr>
  % end
  <tr><th>network</th><td>{{spec.get('network') or ''}}</td></tr>
  <tr><th>timeout</th><td>{{'' if info['timeout_min'] is None else fmt(float(info['timeout_min'])) + ' min'}}</td></tr>
  <tr><th>node</th><td>{{node.where if node is not None else ((spec.get('pin_node') + ' (not placed there yet)') if spec.get('pin_node') else 'this machine')}}</td></tr>
</table>
<table class="kv">
  % res = info['resources']
  <tr><th colspan="2">Resources requested</th></tr>
  <tr><th>CPUs</th><td>{{res.get('cpus', '')}}</td></tr>
  <tr><th>memory</th><td>{{res.get('mem_gb', '')}} GiB</td></tr>
  <tr><th>GPUs</th><td>{{res.get('gpus', 0)}}{{' (≥ %s GiB free)' % res['gpu_mem_gb'] if res.get('gpu_mem_gb') else ''}}{{' pinned %s' % res['gpu_ids'] if res.get('gpu_ids') else ''}}</td></tr>
  % lease = info['lease'] or {}
  % if lease:
  <tr><th>leased GPUs</th><td>{{', '.join(str(g.get('index')) for g in lease.get('gpus') or []) or 'none'}}</td></tr>
  % end
  % pk = info['peaks']
  <tr><th colspan="2">Measured peaks</th></tr>
  <tr><th>memory</th><td>{{fmt_size(pk['mem_bytes']) if pk.get('mem_bytes') is not None else '—'}}</td></tr>
  <tr><th>CPU cores</th><td>{{pk.get('cpu_cores', '—')}}</td></tr>
  <tr><th>CPU seconds</th><td>{{pk.get('cpu_seconds', '—')}}</td></tr>
  % for g in pk.get('gpus') or []:
  <tr><th>GPU {{g.get('index')}}</th><td>{{fmt_size(g['mem_bytes']) if g.get('mem_bytes') is not None else '—'}} memory, {{'—' if g.get('util_pct') is None else '%s%%' % g['util_pct']}} utilization</td></tr>
  % end
</table>
<table class="kv">
  <tr><th colspan="2">Timings</th></tr>
  <tr><th>submitted</th><td class="time">{{!when(info['submitted_at'])}}</td></tr>
  <tr><th>admitted</th><td class="time">{{!when(status.get('admitted_at'))}}</td></tr>
  <tr><th>started</th><td class="time">{{!when(info['started_at'])}}</td></tr>
  <tr><th>finished</th><td class="time">{{!when(info['finished_at'])}}</td></tr>
  <tr><th>duration</th><td>{{'' if info['duration_s'] is None else human_seconds(info['duration_s'])}}</td></tr>
</table>
<table class="kv">
  <tr><th colspan="2">Parameters</th></tr>
  % for k, v in (info['params'] or {}).items():
  <tr><th>{{k}}</th><td>{{v}}</td></tr>
  % end
  % if not info['params']:
  <tr><td colspan="2" class="muted">none</td></tr>
  % end
  <tr><th colspan="2">Tags</th></tr>
  % for k, v in (info['tags'] or {}).items():
  <tr><th>{{k}}</th><td>{{v}}</td></tr>
  % end
  % if not info['tags']:
  <tr><td colspan="2" class="muted">none</td></tr>
  % end
</table>
</div>
</section>

<section id="logs">
<h2>Logs <small id="log-info">{{fmt_size(log['size'])}}</small></h2>
<div class="log-tools">
  <button type="button" id="log-earlier"{{'' if log['start'] > 0 else ' disabled'}}>Load earlier</button>
  <form id="log-search-form" class="log-search" action="/api/runs/{{run.id}}/log/search" method="get">
    <input type="search" id="log-search" name="q" placeholder="search the whole log" aria-label="search the whole log">
  </form>
  <label><input type="checkbox" id="log-follow"{{' checked' if not run.state.finished else ''}}> follow</label>
  <span id="log-count" class="muted"></span>
  <a href="/api/runs/{{run.id}}/log?offset=0&amp;limit=1048576">first MiB</a>
</div>
<div id="log-found" class="log-found" hidden><ol id="log-results"></ol><button type="button" id="log-more" hidden>more results</button></div>
<pre class="log" id="log">{{!''.join(log['lines'])}}</pre>
<div class="log-tools"><button type="button" id="log-later" hidden>Load later</button>
  <button type="button" id="log-end" hidden>Go to the end</button></div>
</section>

<section id="metrics">
<h2>Metrics <small>{{metrics['lines']}} lines, x axis: {{metrics['x_label']}}</small></h2>
% if metrics['skipped_bytes']:
<p class="muted">The file is large: only its last part is charted ({{fmt_size(metrics['skipped_bytes'])}} skipped).</p>
% end
% if not metrics['keys'] and metrics['complete']:
<p class="muted">No numeric metrics in metrics.jsonl yet.</p>
% end
% if metrics['note']:
<p class="muted metrics-note" id="metrics-note">{{metrics['note']}}</p>
% end
% include("charts", src="/api/series?ids=" + q(run.id, safe=""), live=not run.state.finished, keys=chart_keys)
% if metrics['dropped_keys']:
<p class="muted">{{metrics['dropped_keys']}} more keys are not charted: see <a href="/api/runs/{{run.id}}/metrics">the metrics as JSON</a>.</p>
% end
</section>

<section id="artifacts">
<h2>Artifacts <small>output/{{' on node ' + node.name if node is not None else ''}}</small></h2>
% if node is not None and node.files is None:
<p class="error" id="output-unreadable">{{node.unreadable}}</p>
% elif output is None:
<p class="muted">This run has no output/ folder.</p>
% elif not output:
<p class="muted">output/ is empty.</p>
% else:
<div class="scroll"><table class="files">
% for e in output:
% if not e.servable:
<tr class="unservable"><td>{{e.label}} <span class="kind">{{e.note}}</span></td><td></td></tr>
% else:
<tr><td><a href="/runs/{{run.id}}/files/{{q(e.name)}}{{'/' if e.is_dir else ''}}">{{e.name}}{{'/' if e.is_dir else ''}}</a>\\
%   if e.link:
 <span class="kind" title="a symbolic link: served only while it points inside output/">→ link</span>\\
%   end
</td><td>{{'' if e.is_dir or e.link else fmt_size(e.size)}}</td></tr>
% end
% end
</table></div>
% if n_output > len(output):
<p><a href="/runs/{{run.id}}/files/">all {{n_output}} entries</a></p>
% end
% end
</section>

<section id="diff">
<h2>Code diff</h2>
% if not has_diff:
<p class="muted">No code.diff: the run did not snapshot a project.</p>
% elif not diff:
<p class="muted">The snapshot carried no uncommitted changes.</p>
% else:
<pre class="diff">\\
% for kind, line in diff:
<span class="{{kind}}">{{line}}</span>
% end
</pre>
% if diff_cut:
<p class="muted">Cut at 512 KiB: <a href="/runs/{{run.id}}/code.diff">the whole diff</a>.</p>
% end
% end
</section>

<section id="notes">
<h2>Notes</h2>
% for n in info.get('notes') or []:
<div class="note"><div class="note-meta">{{!when(n.get('time'))}} · {{n.get('author', '')}}</div><div class="note-text md">{{!md(n.get('text'))}}</div></div>
% end
% if not info.get('notes') and not info.get('group_notes'):
<p class="muted">No notes yet.</p>
% end
% if info.get('group_notes'):
<h3 id="group-notes">Notes on group {{info['group']}} <small>(<a href="/lessons?group={{q(info['group'], safe='')}}">lessons</a>)</small></h3>
% for n in info['group_notes']:
<div class="note group-note"><div class="note-meta">{{!when(n.get('time'))}} · {{n.get('author', '')}}</div><div class="note-text md">{{!md(n.get('text'))}}</div></div>
% end
% end
<form method="post" action="/runs/{{run.id}}/notes" class="note-form">
  <input type="hidden" name="token" value="{{csrf}}">
  <textarea name="text" rows="3" placeholder="A conclusion to keep with this run" required></textarea>
  <button type="submit">Add note</button>
</form>
</section>

<section id="session">
<h2>Agent session</h2>
% if transcripts:
<div class="scroll"><table class="files transcripts" id="transcripts">
<tr><th>conversation</th><th>size</th><th>format</th><th>messages</th></tr>
% for t in transcripts:
<tr><td><a href="/runs/{{run.id}}/conversation/{{q(t.rel)}}">{{t.rel}}</a></td><td>{{fmt_size(t.size)}}</td><td>{{formats.get(t.format, t.format)}}</td><td>{{'—' if t.messages is None else t.messages}}</td></tr>
% end
</table></div>
% end
% if session is None:
<p class="muted">No agent session was recorded for this run.</p>
% elif not transcripts:
<p class="muted">session/ holds no transcript (<code>*.jsonl</code>) yet.</p>
% end
% if session:
<details class="session-files"><summary>session/ ({{n_session}} entries)</summary>
<div class="scroll"><table class="files">
% for e in session:
% if not e.servable:
<tr class="unservable"><td>{{e.label}} <span class="kind">{{e.note}}</span></td><td></td></tr>
% else:
<tr><td><a href="/runs/{{run.id}}/session/{{q(e.name)}}{{'/' if e.is_dir else ''}}">{{e.name}}{{'/' if e.is_dir else ''}}</a>{{' →' if e.link else ''}}</td><td>{{'' if e.is_dir or e.link else fmt_size(e.size)}}</td></tr>
% end
% end
</table></div></details>
% end
</section>

<section id="events">
<h2>Events</h2>
<div class="scroll"><table class="events">
<tr><th>time</th><th>event</th><th>state</th><th>actor</th><th>reason</th></tr>
% for ev in events[-200:]:
<tr><td class="time">{{!when(ev.get('time'))}}</td><td>{{ev.get('event', '')}}</td><td>{{ev.get('state', '')}}</td><td>{{ev.get('actor', '')}}</td><td>{{ev.get('reason') or ''}}</td></tr>
% end
</table></div>
</section>
</div>
<script src="/static/log.js"></script>
<script src="/static/run.js"></script>
