<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{title}} · Orbit</title>
<link rel="icon" href="{{favicon}}">
% if authed:
<link rel="stylesheet" href="/static/orbit.css">
% else:
<style>{{!css}}</style>
% end
</head>
<body data-page="{{page}}">
<header class="top">
  <a class="brand" href="/">Orbit</a>
  <nav>
    <a href="/">Runs</a>
    <a href="/failures">Failures</a>
    <a href="{{lessons_href}}" id="nav-lessons">Lessons</a>
    <a href="/bench">Bench</a>
    <a href="/browse">Folders</a>
    <a href="/resources">Resources</a>
    <a href="/settings">Settings</a>
% if authed:
    <a href="#" id="show-keys" title="Keyboard shortcuts (?)">?</a>
% end
  </nav>
</header>
<main>
{{!body}}
</main>
% if authed:
<div id="keys" class="keys" hidden>
  <h2>Keyboard shortcuts</h2>
  <dl>
% if page == "listing":
    <dt>j / k</dt><dd>next / previous row</dd>
    <dt>x</dt><dd>select the current row</dd>
    <dt>a</dt><dd>select all shown runs (again: none)</dd>
    <dt>o or Enter</dt><dd>open the current run</dd>
    <dt>l</dt><dd>open the current run's log</dd>
    <dt>c</dt><dd>compare the selected runs</dd>
    <dt>/</dt><dd>search</dd>
    <dt>w</dt><dd>edit the filter expression</dd>
% elif page == "run":
    <dt>f</dt><dd>follow the log on / off</dd>
    <dt>/</dt><dd>search the whole log</dd>
    <dt>l / m / n</dt><dd>go to the logs / metrics / notes</dd>
    <dt>c</dt><dd>cancel this run (asks first)</dd>
% elif page == "conversation":
    <dt>[ / ]</dt><dd>previous / next page of the conversation</dd>
    <dt>e</dt><dd>expand or collapse every tool call</dd>
% elif page in ("compare", "compare_group"):
    <dt>1 … 9</dt><dd>open the n-th run</dd>
% end
    <dt>g r</dt><dd>go to the runs</dd>
    <dt>g b</dt><dd>go to the bench jobs</dd>
    <dt>?</dt><dd>show or hide this list</dd>
  </dl>
</div>
<script src="/static/orbit.js"></script>
<script src="/static/times.js"></script>
% end
</body>
</html>
