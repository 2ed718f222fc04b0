<div class="objective">
<p id="objective" class="{{'ranked' if oc['ok'] else 'not-ranked'}}">{{oc["line"]}}</p>
% for w in oc["warnings"]:
<p class="warning">warning: {{w}}</p>
% end
% if oc["passed"]:
<p class="muted" id="objective-passed">Passed over: {{oc["passed"]}}</p>
% end
<form class="filters" id="objective-control" method="get" action="{{oc['action']}}">
% for name, value in oc["hidden"]:
  <input type="hidden" name="{{name}}" value="{{value}}">
% end
  <label>metric <select name="metric">
% for value, label, chosen in oc["metrics"]:
    <option value="{{value}}"{{' selected' if chosen else ''}}>{{label}}</option>
% end
  </select></label>
  <label>direction <select name="order">
% for value, label, chosen in oc["orders"]:
    <option value="{{value}}"{{' selected' if chosen else ''}}>{{label}}</option>
% end
  </select></label>
  <button type="submit">Rank</button>
</form>
</div>
