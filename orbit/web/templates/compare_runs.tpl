<link rel="stylesheet" href="/static/run.css">
<p class="legend">
% for label, color, r in zip(labels, colors, runs):
<span class="swatch" style="background: {{color}}"></span><a href="/runs/{{r.id}}">{{label}}</a>
% end
</p>
<h2>Metrics</h2>
% for note in metrics_notes:
<p class="muted metrics-note">{{note}}</p>
% end
% if not charts:
<p class="muted">None of these runs has numeric metrics.</p>
% end
<div class="charts">
% for key, svg in charts:
<figure class="metric"><figcaption><b>{{key}}</b></figcaption>{{!svg}}</figure>
% end
</div>
% if more_keys:
<p class="muted">{{more_keys}} more keys are not charted.</p>
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
<script src="/static/charts.js"></script>
