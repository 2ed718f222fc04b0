<link rel="stylesheet" href="/static/run.css">
% base = '/runs/%s/conversation/%s' % (run.id, q(rel))
<h1><a href="/runs/{{run.id}}">Run {{run.id}}</a> · <a href="/runs/{{run.id}}#session">session</a> · {{rel}}</h1>
% if binary:
<p class="muted">A binary file, not a transcript: <a href="/runs/{{run.id}}/session/{{q(rel)}}?raw=1">download it</a>.</p>
% elif pg.size == 0:
<p class="muted">This transcript is empty (the agent may not have written to it yet).</p>
% else:
%   conv, h = pg.conv, pg.header
<div class="conv-head" id="conv-head">
<table class="kv">
  <tr><th>format</th><td>{{formats.get(conv.format, conv.format)}}{{(' ' + h['version']) if h.get('version') else ''}}</td></tr>
%   for key, label in (('session_id', 'session'), ('model', 'model'), ('cwd', 'directory')):
%     if h.get(key):
  <tr><th>{{label}}</th><td><code>{{h[key]}}</code></td></tr>
%     end
%   end
%   whole = pg.start == 0 and pg.end >= pg.size
%   if pg.totals is not None:
  <tr><th>tokens (session)</th><td id="conv-total">{{usage_text(pg.totals.usage)}}</td></tr>
%   end
%   if conv.usage:
  <tr><th>tokens ({{'session' if whole else 'this page'}})</th><td id="conv-usage">{{usage_text(conv.usage)}}</td></tr>
%   end
%   cost = conv.cost_usd if conv.cost_usd is not None else (pg.totals.cost_usd if pg.totals is not None else None)
%   if cost is not None:
  <tr><th>cost</th><td id="conv-cost">${{'%.4f' % cost}}</td></tr>
%   end
  <tr><th>this page</th><td>bytes {{pg.start}}–{{pg.end}} of {{fmt_size(pg.size)}} · {{conv.lines}} lines · {{conv.messages}} messages</td></tr>
</table>
</div>
%   pager = []
%   if pg.prev is not None:
%     pager += [('first', 0, 'conv-first'), ('← previous', pg.prev, 'conv-prev')]
%   end
%   if pg.end < pg.size:
%     pager += [('next →', pg.end, 'conv-next'), ('last', pg.last, 'conv-last')]
%   end
%   if pager:
<nav class="pages conv-pages">\\
%     for label, off, ident in pager:
<a href="{{base}}?offset={{off}}" id="{{ident}}">{{label}}</a> \\
%     end
<button type="button" class="conv-toggle">expand all</button></nav>
%   else:
<nav class="pages conv-pages"><button type="button" class="conv-toggle">expand all</button></nav>
%   end
<div class="conversation" id="conversation">
%   for step in pg.steps:
%     src, mark_of = step['source'], (step.get('extra') or {}).get('orbit', {})
%     text = step.get('message') if isinstance(step.get('message'), str) else ''
%     if src == 'user':
<div class="turn user"><div class="who">user <small class="time">{{!when(step.get('timestamp'))}}</small></div><div class="text md">{{!md(text)}}</div></div>
%     elif src == 'system' and mark_of.get('raw'):
<details class="raw"><summary>a line not understood <small>{{text[:100]}}</small></summary><pre>{{text}}</pre></details>
%     elif src == 'system' and not step.get('observation'):
%       if len(text) <= 300:
<div class="note-line muted">{{text}}</div>
%       else:
<details class="note-line muted"><summary>{{text[:200]}}…</summary><div class="text">{{text}}</div></details>
%       end
%     end
%     if step.get('reasoning_content'):
%       thought = step['reasoning_content']
<details class="thinking"><summary>thinking <small>{{thought[:100]}}</small></summary><div class="text">{{thought}}</div></details>
%     end
%     if src == 'agent' and text:
<div class="turn assistant"><div class="who">assistant <small class="time">{{!when(step.get('timestamp'))}}</small></div><div class="text md">{{!md(text)}}</div></div>
%     end
%     for item in step_tools(step):
%       diff, result = item.get('diff'), item.get('result')
%       state = 'pending' if result is None else ('error' if item.get('is_error') else 'ok')
%       mark = {'pending': '…', 'error': '✗', 'ok': '✓'}[state]
%       what = tool_summary(item)
<details class="tool tool-{{state}}{{' edit' if diff else ''}}"{{!' open' if diff else ''}}><summary><span class="mark">{{mark}}</span> <b>{{item.get('name') or 'tool result'}}</b> <code>{{what}}</code></summary>
%       if item.get('command'):
<pre class="cmd">$ {{item['command']}}</pre>
%       elif item.get('input') is not None and not diff:
<pre class="input">{{json_full(item['input'])}}</pre>
%       end
%       if diff:
<pre class="diff">\\
%         for line in diff:
<span class="{{line_kind(line)}}">{{line}}</span>
%         end
</pre>
%       end
%       if result is not None:
<pre class="result">{{result}}</pre>
%       elif item.get('name') is not None:
<p class="muted">No result on this page.</p>
%       end
%       if item.get('name') is None:
<p class="muted">Its call is not on this page.</p>
%       end
</details>
%     end
%   end
%   if not conv.items:
<p class="muted">No messages on this page.</p>
%   end
</div>
%   if pager:
<nav class="pages conv-pages">\\
%     for label, off, ident in pager:
<a href="{{base}}?offset={{off}}">{{label}}</a> \\
%     end
</nav>
%   end
% end
<script src="/static/conversation.js"></script>
