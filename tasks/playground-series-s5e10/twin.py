"""Offline twin of Kaggle Playground Series S5E10 ("Predicting Road Accident Risk").

``generate(n_rows, seed)`` returns road segments with the competition's columns and a
risk score ``accident_risk`` in [0, 1] (two decimals), plus the noise-free expected risk.

No real data is available offline; value sets and ranges follow the competition's schema
(road_type urban/rural/highway, 1-4 lanes, curvature 0-1, speed limits 25-70, three
lighting, weather and time-of-day levels, four boolean flags, 0-7 reported accidents;
target mean about 0.35, standard deviation about 0.16).

Target = clip(mu + N(0, 0.056), 0, 1), rounded to 0.01. ``truth`` is the exact mean of
the clipped normal (closed form), so it is E[target | row]; the rounding to two decimals
adds no bias worth mentioning (the noise is far wider than the 0.01 grid). Missing
curvature / lighting / weather values contribute their average effect, so mu is a function
of the observed row only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from runner.tasks.twins import Twin, clipped_normal_mean

FEATURES = (
    "road_type", "num_lanes", "curvature", "speed_limit", "lighting", "weather",
    "road_signs_present", "public_road", "time_of_day", "holiday", "school_season",
    "num_reported_accidents",
)  # fmt: skip

ROAD_TYPES = np.array(["urban", "rural", "highway"])
SPEEDS = np.array([25, 35, 45, 60, 70])
# Speed-limit mix by road type (urban roads are slow, highways fast).
SPEED_P = np.array(
    [
        [0.32, 0.30, 0.20, 0.12, 0.06],
        [0.14, 0.20, 0.26, 0.24, 0.16],
        [0.06, 0.10, 0.18, 0.32, 0.34],
    ]
)
LIGHTING = np.array(["daylight", "dim", "night"])
WEATHER = np.array(["clear", "rainy", "foggy"])
TIMES = np.array(["morning", "afternoon", "evening"])
NOISE_SD = 0.056
MISSING = {"curvature": 0.02, "lighting": 0.012, "weather": 0.015}


def generate(n_rows: int, seed: int) -> Twin:
    if n_rows <= 0:
        raise ValueError("n_rows must be positive")
    rng = np.random.default_rng(seed)
    n = n_rows

    road = rng.choice(3, size=n, p=[0.35, 0.33, 0.32])
    lanes = rng.choice(np.arange(1, 5), size=n, p=[0.22, 0.28, 0.26, 0.24])
    curv = np.round(np.clip(rng.beta(1.4, 1.5, n), 0, 1), 2)
    cum = np.cumsum(SPEED_P[road], axis=1)[:, :-1]
    speed = SPEEDS[(rng.random(n)[:, None] > cum).sum(axis=1)]
    light = rng.choice(3, size=n, p=[0.35, 0.33, 0.32])
    weather = rng.choice(3, size=n, p=[0.35, 0.33, 0.32])
    signs = rng.random(n) < 0.50
    public = rng.random(n) < 0.50
    tod = rng.choice(3, size=n, p=[0.33, 0.34, 0.33])
    holiday = rng.random(n) < 0.50
    school = rng.random(n) < 0.50
    accidents = np.minimum(rng.poisson(0.55 + 1.1 * curv + 0.25 * (road == 0)), 7)

    m_curv = rng.random(n) < MISSING["curvature"]
    m_light = rng.random(n) < MISSING["lighting"]
    m_weather = rng.random(n) < MISSING["weather"]

    # ---- expected risk from the observed row ------------------------------------------
    c = np.where(m_curv, 0.48, curv)
    fast = speed >= 60
    light_eff = np.where(m_light, 0.06, np.array([0.0, 0.05, 0.13])[light])
    night = (light == 2) & ~m_light
    weather_eff = np.where(m_weather, 0.055, np.array([0.0, 0.07, 0.10])[weather])
    foggy = (weather == 2) & ~m_weather
    rainy = (weather == 1) & ~m_weather
    mu = (
        -0.06
        + 0.20 * c + 0.20 * np.clip(c - 0.6, 0, None) ** 2 * 4
        + np.array([0.0, 0.02, 0.05, 0.10, 0.15])[np.searchsorted(SPEEDS, speed)]
        + 0.16 * c * fast  # sharp bends are dangerous at speed
        + light_eff
        + weather_eff
        + 0.07 * (foggy & night)
        + 0.06 * rainy * np.clip(c - 0.5, 0, None) * 2
        - np.where(night, 0.07, 0.035) * signs  # signs help most in the dark
        + np.array([0.02, 0.03, 0.0])[road]
        + np.array([0.02, 0.0, 0.01, 0.03])[lanes - 1]
        + np.array([0.0, -0.01, 0.03])[tod]
        + 0.03 * holiday
        + 0.01 * public
        + 0.045 * np.minimum(accidents, 4) + 0.01 * np.clip(accidents - 4, 0, None)
    )  # fmt: skip
    truth = clipped_normal_mean(mu, NOISE_SD, 0.0, 1.0)
    target = np.round(np.clip(mu + rng.normal(0, NOISE_SD, n), 0.0, 1.0), 2)

    def cat(values: np.ndarray, idx: np.ndarray, missing: np.ndarray | None = None) -> np.ndarray:
        out = values[idx].astype(object)
        if missing is not None:
            out[missing] = np.nan
        return out

    table = pd.DataFrame(
        {
            "id": np.arange(n, dtype=np.int64),
            "road_type": cat(ROAD_TYPES, road),
            "num_lanes": lanes.astype(np.int64),
            "curvature": np.where(m_curv, np.nan, curv),
            "speed_limit": speed.astype(np.int64),
            "lighting": cat(LIGHTING, light, m_light),
            "weather": cat(WEATHER, weather, m_weather),
            "road_signs_present": signs,
            "public_road": public,
            "time_of_day": cat(TIMES, tod),
            "holiday": holiday,
            "school_season": school,
            "num_reported_accidents": accidents.astype(np.int64),
            "accident_risk": target,
        }
    )
    return Twin(table=table, truth=pd.Series(truth, index=table.index, name="accident_risk"))
