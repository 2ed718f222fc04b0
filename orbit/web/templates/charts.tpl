% # The charts of a run, a selection or a group: static/charts.js draws them with uPlot from `src`
% # (JSON, web/charts.py); `keys` (the run page) are figures shown before the script runs.
<div class="chart-tools" id="chart-tools">
  <input type="search" id="chart-filter" placeholder="filter keys (loss, acc …)" aria-label="filter the charts by key">
  <label>x <select id="chart-x" aria-label="x axis"></select></label>
  <label>smoothing <input type="range" id="chart-smooth" min="0" max="0.99" step="0.01" value="0"> <output id="chart-smooth-value">0</output></label>
  <label><input type="checkbox" id="chart-log"> log y</label>
  <label>size <select id="chart-size" aria-label="chart size"><option value="s">small</option><option value="m" selected>medium</option><option value="l">large</option></select></label>
  <label id="chart-bands-label" hidden><input type="checkbox" id="chart-bands" checked> mean ± std per setting</label>
  <span class="muted" id="chart-note">drag to zoom, double-click to reset</span>
</div>
<div class="charts size-m" id="charts" data-src="{{src}}" data-live="{{'1' if get('live', False) else '0'}}">
% for key, caption in get("keys", None) or []:
<figure class="metric" data-key="{{key}}"><figcaption><b>{{key}}</b> <small>{{caption}}</small></figcaption></figure>
% end
</div>
<link rel="stylesheet" href="/static/vendor/uPlot.min.css">
<link rel="stylesheet" href="/static/run.css">
<script src="/static/vendor/uPlot.iife.min.js"></script>
<script src="/static/charts.js"></script>
