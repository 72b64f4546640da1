"""Altair charts to SVG and PNG without a browser (``vl-convert-python``: Vega in an embedded
JavaScript runtime, rasterized by resvg), as deterministic bytes.

The data travels inline in the spec (Altair's named datasets, named by a hash of their content),
and ``allowed_base_urls=[]`` forbids every fetch at render time: nothing is read from the
network, whatever a spec says. Text is drawn with the fonts installed on the machine (vl-convert
finds them itself; none is downloaded): an SVG names its font families, a PNG's pixels depend on
which fonts the machine has, so PNGs are byte-identical on one machine, not across machines.
"""

from __future__ import annotations

import json
from typing import Any

import altair as alt
import vl_convert as vlc

FILE_WIDTH = 640  # pixels: the dashboard stretches a chart to its container; a file needs a size
PNG_SCALE = 2  # twice the pixels of the SVG's units: sharp on a high-density screen and in print


def file_spec(chart: alt.TopLevelMixin) -> dict[str, Any]:
    """The chart's Vega-Lite spec at the file width, data inline."""
    sized = chart.properties(width=FILE_WIDTH)
    spec: dict[str, Any] = sized.to_dict()
    return spec


def spec_json(chart: alt.TopLevelMixin) -> str:
    """The spec as canonical JSON text (sorted keys): what the renderer is given."""
    return json.dumps(file_spec(chart), sort_keys=True, ensure_ascii=False)


def to_svg(chart: alt.TopLevelMixin) -> str:
    """The chart as SVG text."""
    svg: str = vlc.vegalite_to_svg(spec_json(chart), allowed_base_urls=[])
    return svg


def svg_to_png(svg: str) -> bytes:
    """An SVG of ``to_svg`` as PNG bytes (``PNG_SCALE`` pixels per SVG unit): rasterized from the
    SVG itself, the same bytes as rendering the spec again, without running Vega twice."""
    png: bytes = vlc.svg_to_png(svg, scale=PNG_SCALE)
    return png
