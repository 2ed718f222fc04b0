<section class="login">
<h1>{{status}}</h1>
<p class="error">{{message}}</p>
% if status.startswith("401"):
<p>Run <code>orbit web</code> in a terminal and open the URL it prints to log in. <a href="/login">More</a>.</p>
% else:
<p><a href="/">Back to the runs</a></p>
% end
</section>
