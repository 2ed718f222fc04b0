% from orbit.human import human_seconds
<h1>Settings</h1>
<p>ORBIT_HOME: <code>{{home}}</code></p>
<h2 id="auth">Auth profiles <small>(read-only; change with <code>orbit auth</code>)</small></h2>
% if auth_problem:
<p class="error">{{auth_problem}}</p>
% elif auth:
<div class="scroll"><table class="profiles auth-profiles">
<thead><tr><th>name</th><th>harness</th><th>kind</th><th>key</th><th>base URL</th><th>network</th><th>last test</th><th>added</th></tr></thead>
<tbody>
% for p in auth:
% t = p["last_test"]
<tr data-profile="{{p['name']}}">
  <td>{{p["name"]}}</td><td>{{p["harness"]}}</td><td>{{p["kind"]}}</td>
  <td><code>{{p["secret"]}}</code></td><td>{{p["base_url"] or "-"}}</td>
  <td>{{"host" if p["host_network"] else "-"}}</td>
% if t:
  <td class="last-test"><span class="state state-{{'ok' if t.get('ok') is True else 'fail'}}">{{"ok" if t.get("ok") is True else "failed"}}</span>
    {{!when(t.get("at"))}}
    (run <a href="/runs/{{t.get('run')}}">{{t.get("run")}}</a>, {{t.get("state")}})</td>
% else:
  <td class="last-test muted">never (<code>orbit auth test {{p["name"]}}</code>)</td>
% end
  <td>{{!when(p["created_at"])}}</td>
</tr>
% end
</tbody></table></div>
% else:
<p>No auth profiles; add one with <code>orbit auth add NAME --harness … --kind …</code>.</p>
% end
<h2 id="notify">Notification profiles <small>(read-only; change with <code>orbit notify</code>)</small></h2>
% if notify_problem:
<p class="error">{{notify_problem}}</p>
% elif notify:
<div class="scroll"><table class="profiles notify-profiles">
<thead><tr><th>name</th><th>kind</th><th>URL</th><th>secret</th><th>events</th><th>groups</th><th>last delivery</th></tr></thead>
<tbody>
% for p in notify:
% last = p["last"]
<tr data-profile="{{p['name']}}">
  <td>{{p["name"]}}</td><td>{{p["kind"]}}</td><td><code>{{p["url"]}}</code></td><td><code>{{p["secret"]}}</code></td>
  <td>{{", ".join(str(e) for e in p["on"])}}</td><td>{{", ".join(str(g) for g in p["groups"]) or "all"}}</td>
% if last:
% good = last["outcome"] == "sent"
  <td class="last-delivery"><span class="state state-{{'ok' if good else 'warn' if last['outcome'] == 'retrying' else 'fail'}}">{{last["outcome"]}}</span>
    {{!when(last["time"])}}: {{last["title"]}}
    % if last["detail"] and not good:
    <br><small class="reason">{{last["detail"][:300]}}</small>
    % end
  </td>
% else:
  <td class="last-delivery muted">none yet</td>
% end
</tr>
% end
</tbody></table></div>
<p class="muted">Every attempt: <code>orbit notify log</code>.</p>
% else:
<p>No notification profiles; add one with <code>orbit notify add NAME --kind … --url-env VAR</code>.</p>
% end
<h2 id="doctor">Doctor <small>(checked {{"just now" if checked_s < 1 else human_seconds(checked_s) + " ago"}}; <a href="/settings?recheck=1#doctor">check again</a>)</small></h2>
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
