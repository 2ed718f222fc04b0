% def sort_url(col):
%   return query.url(sort=col, desc='0' if query.sort == col and query.desc else '1', page=1)
% end
% def mark(col):
%   return (" ▼" if query.desc else " ▲") if query.sort == col else ""
% end
<form class="filters" method="get" action="/" id="filters">
  <input type="search" name="q" id="search" value="{{query.filters.get('q', '')}}" placeholder="Search (/)">
  <select name="state">
    <option value="">any state</option>
    % for s in states:
    <option value="{{s}}"{{' selected' if query.filters.get('state') == s else ''}}>{{s}}</option>
    % end
  </select>
  <input name="name" value="{{query.filters.get('name', '')}}" placeholder="name">
  <input name="group" value="{{query.filters.get('group', '')}}" placeholder="group">
  <input name="tag" value="{{query.filters.get('tag', '')}}" placeholder="tag or key=value">
  <input name="folder" value="{{query.filters.get('folder', '')}}" placeholder="folder">
  <label><input type="checkbox" name="groupby" value="1"{{' checked' if query.grouped else ''}}> by group</label>
  <input type="text" name="where" id="where" class="where{{' bad' if where_error else ''}}" value="{{query.where}}" placeholder="where: lr<1e-3 loss<0.3 state=failed tag:baseline opt=sgd (w)" title="terms on params, metrics, fields and tags, all of which must hold">
  <input type="hidden" name="sort" value="{{query.sort}}">
  <input type="hidden" name="desc" value="{{'1' if query.desc else '0'}}">
  <input type="hidden" name="sel" id="sel" value="{{','.join(query.selected)}}">
  <button type="submit">Filter</button>
  <a href="/">clear</a>
  <details class="columns" id="columns"{{' open' if query.metrics or query.params is not None else ''}}>
    <summary>Columns</summary>
    <div class="choosers">
    <fieldset id="metric-chooser"><legend>metrics</legend>
    % for key in columns.metric_choices:
      <label title="{{key}}"><input type="checkbox" name="metric" value="{{key}}"{{' checked' if key in query.metrics else ''}}> <span class="clamp">{{key}}</span></label>
    % end
    % if not columns.metric_choices:
      <span class="muted">none of the shown runs logged a metric</span>
    % end
    </fieldset>
    <fieldset id="stat-chooser"><legend>of each metric</legend>
    % for stat in ("final", "min", "max"):
      <label><input type="checkbox" name="stat" value="{{stat}}"{{' checked' if stat in query.stats else ''}}> {{stat}}</label>
    % end
    </fieldset>
    <fieldset id="param-chooser"><legend>params{{'' if query.params is not None else ' (none ticked: the most common ones)'}}</legend>
    % for key in columns.param_choices:
      <label title="{{key}}"><input type="checkbox" name="param" value="{{key}}"{{' checked' if query.params is not None and key in query.params else ''}}> <span class="clamp">{{key}}</span></label>
    % end
    % if not columns.param_choices:
      <span class="muted">no run here has params</span>
    % end
    </fieldset>
    <button type="submit">Show</button>
    </div>
  </details>
</form>
% if where_error:
<p class="error where-error" id="where-error" role="alert">{{where_error}}: the expression is not applied.</p>
% end

% if query.filters.get("group"):
% g = q(query.filters["group"], safe="")
<p class="group-links" id="group-links">Group <b>{{query.filters["group"]}}</b>: <a href="/compare?group={{g}}">every setting ranked</a> · <a href="/lessons?group={{g}}">lessons</a> · <a href="/failures?group={{g}}">failures</a></p>
% end
<form id="runs-form" method="post" action="/cancel">
<input type="hidden" name="token" value="{{csrf}}">
<input type="hidden" name="back" value="{{query.url()}}">
<div class="actions">
  <button type="button" id="compare" title="Compare the selected runs (c)">Compare</button>
  <button type="submit" id="cancel" class="danger" title="Cancel the selected runs">Cancel</button>
  <span class="error" id="actions-note" role="status"></span>
  <span class="muted" id="selected-count"></span>
  <span class="count">{{total}} run{{'' if total == 1 else 's'}}</span>
</div>
<div class="scroll">
<table class="runs">
<thead><tr>
  <th><input type="checkbox" id="select-all" title="select all shown (a)"></th>
  % for col in ("id", "name", "state"):
  <th><a href="{{sort_url(col)}}">{{col}}{{mark(col)}}</a></th>
  % end
  % for c in columns.params:
  <th class="param" data-col="{{c.id}}"><a href="{{sort_url(c.id)}}" title="param {{c.key}}: sort"><span class="clamp">{{c.label}}</span>{{mark(c.id)}}</a></th>
  % end
  % for c in columns.metrics:
  <th class="metric-col" data-col="{{c.id}}"><a href="{{sort_url(c.id)}}" title="the {{c.kind}} value of {{c.key}}: sort"><span class="clamp">{{c.label}}</span>{{mark(c.id)}}</a></th>
  % end
  % if not columns.metrics:
  <th class="metric" title="the latest value of the run's main metric">metric</th>
  % end
  % for col in ("group", "folder", "submitted", "duration"):
  <th class="col-{{col}}"><a href="{{sort_url(col)}}">{{col}}{{mark(col)}}</a></th>
  % end
  <th class="col-resources">resources</th><th class="reason"><a href="{{sort_url('reason')}}">reason{{mark('reason')}}</a></th><th class="notes">notes</th>
</tr></thead>
<tbody>
% ncols = 12 + len(columns.params) + max(1, len(columns.metrics))
% chosen = set(query.selected)
% last_group = None
% for r in rows:
%   if query.grouped and r.get("group") != last_group:
%     last_group = r.get("group")
%     if last_group:
%       g = q(last_group, safe="")
<tr class="group-row"><th colspan="{{ncols}}"><a href="/?group={{g}}" class="clamp" title="{{last_group}}">{{last_group}}</a> <small><a href="/compare?group={{g}}">settings</a> · <a href="/lessons?group={{g}}">lessons</a></small></th></tr>
%     else:
<tr class="group-row"><th colspan="{{ncols}}">(no group)</th></tr>
%     end
%   end
%   if r["error"]:
<tr class="run broken" data-id="{{r['id']}}">
  <td><input type="checkbox" name="ids" value="{{r['id']}}"{{' checked' if r['id'] in chosen else ''}}></td>
  <td><a href="/runs/{{r['id']}}">{{r['id']}}</a></td>
  <td colspan="{{ncols - 2}}" class="error">cannot read this run: {{r['error']}}</td>
</tr>
%   else:
<tr class="run" data-id="{{r['id']}}">
  <td><input type="checkbox" name="ids" value="{{r['id']}}"{{' checked' if r['id'] in chosen else ''}}></td>
  <td><a href="/runs/{{r['id']}}">{{r['id']}}</a></td>
  <td class="name" title="{{r['name']}}">{{r['name']}}</td>
  <td><span class="state state-{{r['state']}}" data-field="state">{{r['state']}}</span></td>
%     for c, (text, title) in zip(columns.params + columns.metrics, r['cells']):
  <td class="{{'num' if c.is_metric else 'param'}}" data-col="{{c.id}}" title="{{title}}">{{text}}</td>
%     end
%     if not columns.metrics:
  <td class="metric" data-field="metric" title="{{r['metric']}}">{{r['metric']}}</td>
%     end
%     if r['group']:
  <td class="col-group"><a href="/?group={{q(r['group'], safe='')}}" title="this group's runs, its settings and lessons">{{r['group']}}</a></td>
%     else:
  <td class="col-group"></td>
%     end
  <td class="col-folder" title="{{r['folder']}}">{{r['folder']}}</td>
  <td class="time col-submitted">{{!when(r['submitted_at'])}}</td>
  <td class="col-duration" data-field="duration">{{r['duration']}}</td>
  <td class="col-resources">{{r['resources']}}</td>
  <td class="reason" data-field="reason" title="{{r['reason']}}">{{r['reason']}}</td>
  <td class="notes" title="{{r['last_note']}}">{{r['notes']}}</td>
</tr>
%   end
% end
% if not rows:
<tr><td colspan="{{ncols}}" class="empty">No runs{{' match these filters' if query.narrowed else ' yet: start one with orbit run'}}.</td></tr>
% end
</tbody>
</table>
</div>
</form>

% if pages > 1:
<nav class="pages">
  % if page > 1:
  <a href="{{query.url(page=page - 1)}}" rel="prev">← previous</a>
  % end
  <span>page {{page}} of {{pages}}</span>
  % if page < pages:
  <a href="{{query.url(page=page + 1)}}" rel="next">next →</a>
  % end
</nav>
% end
