<h1>Settings</h1>
<p>ORBIT_HOME: <code>{{home}}</code></p>
<h2>Doctor</h2>
<div class="scroll"><table>
<thead><tr><th>check</th><th>status</th><th>detail</th><th>fix</th></tr></thead>
<tbody>
% for c in checks:
<tr class="check-{{c.get('status', '')}}">
  <td>{{c.get("name", "")}}</td>
  <td><span class="state state-{{c.get('status', '')}}">{{c.get("status", "")}}</span></td>
  <td>{{c.get("detail", "")}}</td>
  <td>{{c.get("fix") or ""}}</td>
</tr>
% end
</tbody></table></div>
<h2>Configuration <small>(config.yaml; change with <code>orbit config set</code>)</small></h2>
<table class="kv">
% for key in sorted(config):
<tr><th>{{key}}</th><td>{{"-" if config[key] is None else config[key]}}</td></tr>
% end
</table>
<form method="post" action="/logout"><input type="hidden" name="token" value="{{csrf}}"><button type="submit">Log out of this browser</button></form>
