<h1>Compare runs {{', '.join(r.id for r in runs)}}</h1>
% include("compare_runs")
