<form class="filters" method="get" action="/">
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
  <input type="hidden" name="sort" value="{{query.sort}}">
  <input type="hidden" name="desc" value="{{'1' if query.desc else '0'}}">
  <button type="submit">Filter</button>
  <a href="/">clear</a>
</form>

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
  <span class="count">{{total}} run{{'' if total == 1 else 's'}}</span>
</div>
<div class="scroll">
<table class="runs">
<thead><tr>
  <th><input type="checkbox" id="select-all" title="select all"></th>
  % for col in ("id", "name", "state"):
  %   mark = (" ▼" if query.desc else " ▲") if query.sort == col else ""
  <th><a href="{{query.url(sort=col, desc='0' if query.sort == col and query.desc else '1', page=1)}}">{{col}}{{mark}}</a></th>
  % end
  <th class="params">params</th><th class="metric" title="the latest value of the run's main metric">metric</th>
  % for col in ("group", "folder", "submitted", "duration"):
  %   mark = (" ▼" if query.desc else " ▲") if query.sort == col else ""
  <th class="col-{{col}}"><a href="{{query.url(sort=col, desc='0' if query.sort == col and query.desc else '1', page=1)}}">{{col}}{{mark}}</a></th>
  % end
  <th class="col-resources">resources</th><th class="reason">reason</th><th class="notes">notes</th>
</tr></thead>
<tbody>
% last_group = None
% for r in rows:
%   if query.grouped and r.get("group") != last_group:
%     last_group = r.get("group")
%     if last_group:
%       g = q(last_group, safe="")
<tr class="group-row"><th colspan="13"><a href="/?group={{g}}">{{last_group}}</a> <small><a href="/compare?group={{g}}">settings</a> · <a href="/lessons?group={{g}}">lessons</a></small></th></tr>
%     else:
<tr class="group-row"><th colspan="13">(no group)</th></tr>
%     end
%   end
%   if r["error"]:
<tr class="run broken" data-id="{{r['id']}}">
  <td><input type="checkbox" name="ids" value="{{r['id']}}"></td>
  <td><a href="/runs/{{r['id']}}">{{r['id']}}</a></td>
  <td colspan="11" class="error">cannot read this run: {{r['error']}}</td>
</tr>
%   else:
<tr class="run" data-id="{{r['id']}}">
  <td><input type="checkbox" name="ids" value="{{r['id']}}"></td>
  <td><a href="/runs/{{r['id']}}">{{r['id']}}</a></td>
  <td class="name">{{r['name']}}</td>
  <td><span class="state state-{{r['state']}}" data-field="state">{{r['state']}}</span></td>
  <td class="params">{{r['params']}}</td>
  <td class="metric" data-field="metric">{{r['metric']}}</td>
%     if r['group']:
  <td class="col-group"><a href="/?group={{q(r['group'], safe='')}}" title="this group's runs, its settings and lessons">{{r['group']}}</a></td>
%     else:
  <td class="col-group"></td>
%     end
  <td class="col-folder">{{r['folder']}}</td>
  <td class="time col-submitted">{{!when(r['submitted_at'])}}</td>
  <td class="col-duration" data-field="duration">{{r['duration']}}</td>
  <td class="col-resources">{{r['resources']}}</td>
  <td class="reason" data-field="reason">{{r['reason']}}</td>
  <td class="notes" title="{{r['last_note']}}">{{r['notes']}}</td>
</tr>
%   end
% end
% if not rows:
<tr><td colspan="13" class="empty">No runs{{' match these filters' if query.filters else ' yet: start one with orbit run'}}.</td></tr>
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
