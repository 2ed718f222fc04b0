<section class="login">
<h1>Log in to Orbit</h1>
% if wrong:
<p class="error">That login link is not valid (the token may have changed).</p>
% end
% if logged_in:
<p>You are logged in. <a href="/">Go to the runs</a>.</p>
% else:
<p>This page needs the token of this Orbit home. In a terminal on the machine, run</p>
<pre>orbit web</pre>
<p>and open the URL it prints (<code>orbit web --open</code> opens it for you). The link stores
the token in a cookie for this browser.</p>
<p>From another machine, forward the port first:
<code>ssh -L 7717:127.0.0.1:7717 HOST</code>, then open the printed URL.</p>
% end
</section>
