<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{title}} · Orbit</title>
<link rel="stylesheet" href="/static/orbit.css">
</head>
<body>
<header class="top">
  <a class="brand" href="/">Orbit</a>
  <nav>
    <a href="/">Runs</a>
    <a href="/resources">Resources</a>
    <a href="/settings">Settings</a>
    <a href="#" id="show-keys" title="Keyboard shortcuts (?)">?</a>
  </nav>
</header>
<main>
{{!body}}
</main>
<div id="keys" class="keys" hidden>
  <h2>Keyboard shortcuts</h2>
  <dl>
    <dt>j / k</dt><dd>next / previous row</dd>
    <dt>x</dt><dd>select the current row</dd>
    <dt>o or Enter</dt><dd>open the current run</dd>
    <dt>l</dt><dd>open the current run's log</dd>
    <dt>c</dt><dd>compare the selected runs</dd>
    <dt>/</dt><dd>search</dd>
    <dt>?</dt><dd>show or hide this list</dd>
  </dl>
</div>
<script src="/static/orbit.js"></script>
</body>
</html>
