"""Reports people look at, made from an output folder's files: the HTML build report
(`reports/index.html`, registered under `orchestrate.reports`) and the patch between two builds
(`orchestrate diff`).

- `outputs.py` reads an output folder: the manifest, the bundles' tables of contents, the JSON
  reports, link.xml;
- `state.py` is a build's published state in brief (bundles, entries, loose files), what diffs
  compare;
- `diff.py` compares two states: what a patch from one build to the other must ship;
- `pagedata.py` turns an output folder and a run record into the page's compact data;
- `charts.py` draws the treemap and the timeline as SVG;
- `html.py` renders the page (Jinja2) and is the registered renderer.
"""
