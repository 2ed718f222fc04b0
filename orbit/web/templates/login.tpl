<section class="login">
<h1>Log in to Orbit</h1>
% if wrong:
<p class="error">That login link is not valid: it was used already, it is older than 10 minutes, or the token changed. Run <code>orbit web</code> again for a new one.</p>
% end
% if elsewhere:
<p class="note">This address keeps no session: browsers open Orbit under the private host name
in the URL <code>orbit web</code> prints (<code>http://o-….localhost:PORT/…</code>), so that no
other server on this machine ever receives your session.</p>
% end
% if logged_in:
<p>You are logged in. <a href="/">Go to the runs</a>.</p>
% else:
<p>This page needs a login link of this Orbit home. In a terminal on the machine, run</p>
<pre>orbit web</pre>
<p>and open the URL it prints (<code>orbit web --open</code> opens it for you). Each link works
once, within 10 minutes, and gives this browser a session cookie.</p>
<p>From another machine, forward the same port first:
<code>ssh -L 7717:127.0.0.1:7717 HOST</code>, then open the printed URL.</p>
<form method="post" action="/login">
<p><label>Or paste the token of <code>ORBIT_HOME/web-token</code>:
<input type="password" name="token" autocomplete="off"></label>
<input type="hidden" name="next" value="{{next}}">
<button type="submit">Log in</button></p>
</form>
% end
</section>
