"""Reports: one self-contained HTML file (plotly, offline) and the same charts as PNG/SVG (matplotlib)."""
