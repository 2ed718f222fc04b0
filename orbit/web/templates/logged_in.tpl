<section class="login">
<h1>Logged in</h1>
<p>This browser has a session now. <a href="{{next}}">Continue</a>.</p>
</section>
