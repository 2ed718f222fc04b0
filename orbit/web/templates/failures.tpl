<h1>Failures{{' in group ' + group if group else ''}}{{' under ' + folder if folder else ''}}</h1>
<form class="filters" method="get" action="/failures">
  <input name="group" value="{{group or ''}}" placeholder="group">
  <input name="folder" value="{{folder or ''}}" placeholder="folder">
  <button type="submit">Filter</button>
  <a href="/failures">clear</a>
</form>
% if not failures:
<p id="no-failures">No failed runs{{' in this group' if group else ''}}.</p>
% end
% for f in failures:
<section class="failure">
<h2><code class="signature">{{f.signature}}</code></h2>
<p><b>{{f.count}} run{{'' if f.count == 1 else 's'}}</b>:
% for rid in f.run_ids:
<a href="/runs/{{rid}}">{{rid}}</a>
% end
{{'…' if f.count > len(f.run_ids) else ''}}
% if f.shared_params:
· all {{', '.join('%s=%s' % (k, v) for k, v in f.shared_params.items())}}
% end
· first <span class="time">{{!when(f.first_seen)}}</span>,
last <span class="time">{{!when(f.last_seen)}}</span></p>
% for line in f.outcome.lines:
<p class="outcome outcome-{{f.outcome.status}}">{{line}}</p>
% end
<div class="muted">Run <a href="/runs/{{f.example_id}}">{{f.example_id}}</a>: {{f.reason or ''}}</div>
% if f.excerpt:
<pre class="log">{{f.excerpt}}</pre>
% end
</section>
% end
