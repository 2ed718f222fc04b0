<link rel="stylesheet" href="/static/run.css">
<h1><a href="/runs/{{run.id}}">Run {{run.id}}</a> · <a href="/runs/{{run.id}}/{{area}}/">{{folder}}/</a>\\
% parts = [p for p in rel.split('/') if p]
% for i, p in enumerate(parts):
<a href="/runs/{{run.id}}/{{area}}/{{q('/'.join(parts[:i + 1]))}}{{'/' if i < len(parts) - 1 or preview is None else ''}}">{{p}}</a>{{'/' if i < len(parts) - 1 else ''}}\\
% end
</h1>
% if node is not None:
<p class="muted" id="files-node">Read through node {{node.name}}: this run runs {{node.where}}, and its output/ stays there.</p>
% end
% if preview is None:
%   if not entries:
<p class="muted">This folder is empty.</p>
%   else:
<table class="files">
<tr><th>name</th><th>size</th></tr>
%     for e in entries:
%       href = '/runs/%s/%s/%s' % (run.id, area, q((rel + '/' if rel else '') + e.name))
%       if not e.servable:
<tr class="unservable"><td>{{e.label}} <span class="kind">{{e.note}}</span></td><td></td></tr>
%       else:
<tr><td><a href="{{href}}{{'/' if e.is_dir else ''}}">{{e.name}}{{'/' if e.is_dir else ''}}</a>\\
%         if e.link:
 <span class="kind" title="a symbolic link: served only while it points inside the folder">→ link</span>\\
%         end
</td><td>{{'' if e.is_dir or e.link else fmt_size(e.size)}}</td></tr>
%       end
%     end
</table>
%     if total > len(entries):
<p class="muted">Showing {{len(entries)}} of {{total}} entries.</p>
%     end
%   end
% else:
%   raw = '/runs/%s/%s/%s?raw=1' % (run.id, area, q(rel))
<p class="muted">{{fmt_size(preview.size)}} · <a href="{{raw}}">raw</a>{{' · ' + preview.note if preview.note else ''}}</p>
%   if preview.kind == 'image':
<img class="preview" src="{{raw}}" alt="{{rel}}">
%   elif preview.kind == 'csv':
<div class="scroll"><table class="csv">
%     for i, row in enumerate(preview.rows):
<tr>\\
%       for cell in row:
%         if i == 0:
<th>{{cell}}</th>\\
%         else:
<td>{{cell}}</td>\\
%         end
%       end
</tr>
%     end
</table></div>
%     if preview.truncated:
<p class="muted">The first 200 rows are shown.</p>
%     end
%   elif preview.kind in ('json', 'text'):
<pre class="preview {{preview.kind}}">{{preview.text}}</pre>
%     if preview.truncated:
<p class="muted">Cut at 256 KiB: the <a href="{{raw}}">raw file</a> has the rest.</p>
%     end
%   elif preview.kind == 'large':
<p class="muted">Too large to preview through the node: <a href="{{raw}}">download it</a>.</p>
%   elif preview.kind == 'empty':
<p class="muted">This file is empty.</p>
%   else:
<p class="muted">A binary file: <a href="{{raw}}">download it</a>.</p>
%   end
% end
