<link rel="stylesheet" href="/static/run.css">
<p class="legend">
% for label, color, r in zip(labels, colors, runs):
<span class="swatch" style="background: {{color}}"></span><a href="/runs/{{r.id}}">{{label}}</a>
% end
</p>
% if chart_src:
<h2>Metrics</h2>
% include("charts", src=chart_src)
% end
% for title, rows in sections:
%   if rows:
<h2>{{title}}</h2>
<div class="scroll"><table class="compare">
<tr><th></th>
%     for label, color in zip(labels, colors):
<th><span class="swatch" style="background: {{color}}"></span>{{label}}</th>
%     end
</tr>
%     for name, values, differs in rows:
<tr class="{{'differs' if differs else ''}}"><th>{{name}}</th>
%       for v in values:
<td>{{v}}</td>
%       end
</tr>
%     end
</table></div>
%   end
% end
<p class="muted">Rows that differ between the runs are highlighted.</p>
