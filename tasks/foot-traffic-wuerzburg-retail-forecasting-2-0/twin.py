"""Offline twin of the Kaggle competition "foot-traffic-wuerzburg-retail-forecasting-2-0".

``generate(n_rows, seed)`` returns hourly, normalized pedestrian counts for three Würzburg
shopping streets over two calendar years (2023-2024; longer if more rows are asked for),
with the city's weather and temperature, and the noise-free expected value of every row.

Calibration (measured once on ``shared/data/wuerzburg_pedestrians_2024.csv``, the city's
hystreet counts Jan-Jul 2024, licence dl-de/by-2-0, attribution Stadt Würzburg; the file is
never read here):

* ``REFERENCE``: each street's 95th-percentile hourly count in that file. The target is
  count / reference, so 1.0 is a busy hour and a Saturday-afternoon peak is about 1.1-1.4.
* ``PROFILE``: mean normalized count per street x day type (Mon-Thu, Fri, Sat, Sun/holiday)
  x hour, from the same file (public holidays excluded).
* Weather categories and their frequencies, day/night variants, temperature by month
  (Jan, Mar-Jun) and the diurnal temperature swing. Other months use long-term
  Würzburg climate means (approximate). Effects of weather (rain -20 %, snow -30 %,
  clear +8 %) and of holidays (about -60 %) are of the size seen in the file's residuals.

The expected count depends only on what the table shows: street, the calendar derived from
``timestamp`` (hour, weekday, Bavarian public holidays, Christmas-market season, month,
year), ``weather_condition`` and ``temperature``. A missing weather value contributes
nothing and a missing temperature counts as the month's typical temperature for that hour,
so ``truth`` is exactly E[target | row]. Noise is multiplicative (lognormal, mean 1), so
the target is never negative; it is rounded to whole counts before normalizing (negligible).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from runner.tasks.twins import Twin

FEATURES = ("street", "timestamp", "weather_condition", "temperature")
STREETS = np.array(["Kaiserstraße", "Spiegelstraße", "Schönbornstraße"])
REFERENCE = np.array([2289.0, 1543.0, 3330.0])  # p95 hourly count, 2024 file
START = np.datetime64("2023-01-01")
BASE_DAYS = 731  # 2023-01-01 .. 2024-12-31

# Mean count / REFERENCE by street (Kaiser-, Spiegel-, Schönbornstraße), day type
# (Mon-Thu, Fri, Sat, Sun or holiday) and hour 0-23 (two lines per day type).
_PROFILE_TEXT = """
0.007 0.004 0.005 0.015 0.054 0.162 0.281 0.361 0.507 0.645 0.770 0.858   # Kaisers Mon-Thu 0-11h
0.832 0.816 0.868 0.886 0.770 0.573 0.328 0.169 0.113 0.041 0.031 0.017
0.014 0.009 0.009 0.016 0.047 0.148 0.256 0.344 0.514 0.667 0.789 0.920   # Kaisers Fri 0-11h
0.944 0.933 0.932 0.909 0.850 0.728 0.477 0.286 0.204 0.086 0.093 0.055
0.028 0.017 0.018 0.019 0.026 0.046 0.099 0.230 0.435 0.642 0.836 0.988   # Kaisers Sat 0-11h
1.062 1.129 1.186 1.157 1.062 0.856 0.558 0.328 0.231 0.094 0.111 0.066
0.037 0.027 0.025 0.022 0.023 0.025 0.041 0.079 0.138 0.204 0.260 0.301   # Kaisers Sun/hol 0-11h
0.316 0.355 0.356 0.349 0.309 0.271 0.220 0.165 0.122 0.043 0.027 0.033
0.007 0.005 0.006 0.022 0.076 0.189 0.306 0.419 0.543 0.649 0.809 0.899   # Spiegel Mon-Thu 0-11h
0.835 0.774 0.781 0.785 0.673 0.487 0.316 0.197 0.129 0.046 0.035 0.019
0.009 0.006 0.007 0.023 0.063 0.160 0.269 0.400 0.547 0.656 0.770 0.862   # Spiegel Fri 0-11h
0.868 0.816 0.824 0.799 0.717 0.563 0.395 0.283 0.199 0.084 0.080 0.039
0.021 0.013 0.013 0.014 0.038 0.054 0.104 0.261 0.493 0.678 0.899 1.101   # Spiegel Sat 0-11h
1.075 1.097 1.115 0.995 0.815 0.667 0.495 0.335 0.234 0.077 0.084 0.037
0.024 0.014 0.011 0.011 0.018 0.022 0.044 0.106 0.186 0.259 0.354 0.426   # Spiegel Sun/hol 0-11h
0.491 0.549 0.560 0.509 0.403 0.336 0.243 0.152 0.102 0.031 0.025 0.021
0.004 0.003 0.002 0.005 0.014 0.054 0.108 0.203 0.362 0.521 0.647 0.713   # Schönbo Mon-Thu 0-11h
0.720 0.714 0.729 0.717 0.606 0.410 0.206 0.102 0.065 0.023 0.020 0.010
0.008 0.005 0.005 0.006 0.012 0.048 0.103 0.209 0.395 0.570 0.693 0.783   # Schönbo Fri 0-11h
0.853 0.858 0.880 0.859 0.753 0.566 0.315 0.182 0.127 0.055 0.060 0.036
0.021 0.013 0.011 0.007 0.008 0.013 0.040 0.150 0.380 0.678 0.987 1.182   # Schönbo Sat 0-11h
1.257 1.382 1.422 1.325 1.084 0.770 0.413 0.223 0.167 0.059 0.076 0.041
0.027 0.017 0.014 0.012 0.008 0.009 0.019 0.050 0.088 0.143 0.182 0.212   # Schönbo Sun/hol 0-11h
0.257 0.300 0.292 0.261 0.214 0.165 0.128 0.087 0.064 0.022 0.017 0.022
"""
PROFILE = np.array(
    [float(v) for line in _PROFILE_TEXT.splitlines() for v in line.split("#")[0].split()]
).reshape(3, 4, 24)
# fmt: off
# Monthly mean temperature (°C): Jan and Mar-Jun from the 2024 file; Feb (7.4 in the warm
# February 2024), Jul (partial month in the file) and Aug-Dec are long-term climate means.
TEMP_MONTH = np.array([1.8, 4.0, 8.2, 10.5, 15.0, 18.0, 19.5, 19.3, 15.0, 10.0, 5.0, 2.5])
# Diurnal swing relative to the daily mean (2024 file, all months pooled).
TEMP_HOUR = np.array([-2.9, -3.1, -3.3, -3.4, -3.5, -3.2, -2.3, -1.5, -0.4, 0.6, 1.5, 2.3,
                      2.8, 3.2, 3.4, 3.3, 2.9, 1.9, 1.2, -0.1, -1.0, -1.2, -2.1, -2.6])
# Sunrise / sunset hour by month (Würzburg, local time) for the -day / -night variants.
SUNRISE = np.array([8, 7, 7, 7, 6, 5, 5, 6, 7, 7, 7, 8])
SUNSET = np.array([16, 17, 18, 20, 20, 21, 21, 20, 19, 18, 16, 16])
# fmt: on
# Weather kinds; frequencies from the 2024 file (snow only in winter; fog and wind rare).
KINDS = np.array(["clear", "partly-cloudy", "cloudy", "rain", "snow", "fog", "wind"])
KIND_P_WINTER = np.array([0.17, 0.22, 0.36, 0.20, 0.03, 0.015, 0.005])
KIND_P_SUMMER = np.array([0.28, 0.31, 0.24, 0.16, 0.0, 0.005, 0.005])
KIND_EFFECT = np.array([0.08, 0.02, -0.05, -0.22, -0.33, -0.10, -0.15])  # log-multiplier
WINTER_MONTHS = np.array([1, 2, 3, 11, 12])
NOISE_SD = 0.22  # hourly log-noise
MISSING_WEATHER = 0.012
MISSING_TEMP = 0.01


# Bavarian public holidays on fixed dates (Easter-based ones are computed below).
FIXED_HOLIDAYS = ("01-01", "01-06", "05-01", "08-15", "10-03", "11-01", "12-25", "12-26")


def _easter(year: int) -> np.datetime64:
    a, b, c = year % 19, year // 100, year % 100
    d, e = b // 4, b % 4
    f = (b + 8) // 25
    g = (b - f + 1) // 3
    h = (19 * a + b - d - g + 15) % 30
    i, k = c // 4, c % 4
    ll = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 22 * ll) // 451
    month = (h + ll - 7 * m + 114) // 31
    day = (h + ll - 7 * m + 114) % 31 + 1
    return np.datetime64(f"{year:04d}-{month:02d}-{day:02d}")


def _bavarian_holidays(years: range) -> np.ndarray:
    days = []
    for y in years:
        e = _easter(y)
        days += [e + np.timedelta64(k, "D") for k in (-2, 1, 39, 50, 60)]
        days += [np.datetime64(f"{y:04d}-{md}") for md in FIXED_HOLIDAYS]
    return np.array(days, dtype="datetime64[D]")


@dataclass(frozen=True)
class _Calendar:
    """One value per day: the calendar the expected count depends on."""

    years: np.ndarray
    month: np.ndarray
    daytype: np.ndarray  # 0 Mon-Thu, 1 Fri, 2 Sat, 3 Sun or holiday
    xmas_market: np.ndarray
    short_day: np.ndarray  # Dec 24 and 31: shops close at 14h


@dataclass(frozen=True)
class _Weather:
    """One value per city hour (day-major): hour of day, weather and temperature."""

    hour: np.ndarray
    day: np.ndarray  # index of the hour's day
    kind: np.ndarray  # index into KINDS
    label: np.ndarray  # weather_condition as shown (NaN where missing)
    temp: np.ndarray
    clim: np.ndarray  # the month's typical temperature at that hour
    weather_missing: np.ndarray
    temp_missing: np.ndarray
    temp_obs: np.ndarray  # temperature as shown (NaN where missing)


def _calendar(n_days: int) -> _Calendar:
    day = START + np.arange(n_days).astype("timedelta64[D]")
    years = day.astype("datetime64[Y]").astype(int) + 1970
    month = day.astype("datetime64[M]").astype(int) % 12 + 1
    dom = (day - day.astype("datetime64[M]")).astype(int) + 1
    dow = (day.astype(int) + 3) % 7  # 1970-01-01 was a Thursday; 0 = Monday
    holiday = np.isin(day, _bavarian_holidays(range(int(years[0]), int(years[-1]) + 1)))
    return _Calendar(
        years=years,
        month=month,
        daytype=np.select([holiday | (dow == 6), dow == 5, dow == 4], [3, 2, 1], 0),
        xmas_market=((month == 11) & (dom >= 24)) | ((month == 12) & (dom <= 23)),
        short_day=(month == 12) & ((dom == 24) | (dom == 31)),
    )


def _weather(rng: np.random.Generator, cal: _Calendar, n_days: int) -> _Weather:
    """City-wide weather and temperature, hour by hour (draws from ``rng`` in a fixed order)."""
    n_hours = n_days * 24
    month = cal.month
    day = START + np.arange(n_days).astype("timedelta64[D]")
    hour = np.tile(np.arange(24), n_days)
    d_of_h = np.repeat(np.arange(n_days), 24)
    m_h = month[d_of_h]
    winter = np.isin(m_h, WINTER_MONTHS)
    # Weather: a daily regime, re-drawn for about a third of the hours.
    kind_p = np.where(np.isin(month, WINTER_MONTHS)[:, None], KIND_P_WINTER, KIND_P_SUMMER)
    daily = (rng.random(n_days)[:, None] > np.cumsum(kind_p, axis=1)[:, :-1]).sum(axis=1)
    hourly = (rng.random(n_hours)[:, None] > np.cumsum(kind_p[d_of_h], axis=1)[:, :-1]).sum(axis=1)
    kind = np.where(rng.random(n_hours) < 0.35, hourly, daily[d_of_h])
    is_day = (hour >= SUNRISE[m_h - 1]) & (hour < SUNSET[m_h - 1])
    label = KINDS[kind].astype(object)
    sky = kind <= 1
    label[sky & is_day] = np.char.add(KINDS[kind[sky & is_day]], "-day")
    label[sky & ~is_day] = np.char.add(KINDS[kind[sky & ~is_day]], "-night")
    # Temperature: month mean (interpolated over the year) + diurnal swing + weather spells.
    doy_frac = (day - day.astype("datetime64[Y]")).astype(int) / 365.25 * 12 - 0.5
    mean_day = np.interp(
        doy_frac, np.arange(-1, 13), np.r_[TEMP_MONTH[-1], TEMP_MONTH, TEMP_MONTH[0]]
    )
    clim = mean_day[d_of_h] + TEMP_HOUR[hour] * np.where(winter, 0.7, 1.25)
    anomaly = np.repeat(rng.normal(0, 3.2, n_days), 24) + rng.normal(0, 0.8, n_hours)
    temp = np.round(
        clim + anomaly - 1.2 * (kind == 3) + 1.0 * ((kind == 0) & is_day) - 1.0 * (kind == 4)
    )
    clim = np.round(clim)
    weather_missing = rng.random(n_hours) < MISSING_WEATHER
    temp_missing = rng.random(n_hours) < MISSING_TEMP
    label[weather_missing] = np.nan
    return _Weather(
        hour=hour,
        day=d_of_h,
        kind=kind,
        label=label,
        temp=temp,
        clim=clim,
        weather_missing=weather_missing,
        temp_missing=temp_missing,
        temp_obs=np.where(temp_missing, np.nan, temp),
    )


def _log_effect(cal: _Calendar, w: _Weather, h_idx: np.ndarray, s: np.ndarray) -> np.ndarray:
    """Log-multiplier of each row's expected count over its street/day type/hour profile."""
    hr = w.hour[h_idx]
    di = w.day[h_idx]
    dt = cal.daytype[di]
    t_eff_src = np.where(w.temp_missing[h_idx], w.clim[h_idx], w.temp[h_idx])
    return (
        np.where(w.weather_missing[h_idx], 0.0, KIND_EFFECT[w.kind[h_idx]])
        # rain keeps weekend shoppers at home more than commuters
        * np.where(dt >= 2, 1.4, 1.0)
        # cold and heat both cost visitors; warm evenings fill the streets
        - 0.018 * np.clip(10.0 - t_eff_src, 0, None)
        - 0.035 * np.clip(t_eff_src - 27.0, 0, None)
        + 0.30 * np.clip((t_eff_src - 16.0) / 10.0, 0, 1) * ((hr >= 19) & (hr <= 23))
        # Christmas market (mostly around Schönbornstraße / Marktplatz), late afternoon peak
        + cal.xmas_market[di] * np.where(s == 2, 0.30, 0.15) * ((hr >= 11) & (hr <= 21))
        + cal.xmas_market[di] * 0.25 * ((hr >= 17) & (hr <= 21))
        - 0.55 * (cal.short_day[di] & (hr >= 14))
        # January sales lull, summer vacation dip, slow growth after the pandemic years
        - 0.10 * (cal.month[di] == 1)
        - 0.07 * (cal.month[di] == 8)
        + 0.05 * (cal.years[di] - 2023)
    )


def generate(n_rows: int, seed: int) -> Twin:
    if n_rows <= 0:
        raise ValueError("n_rows must be positive")
    rng = np.random.default_rng(seed)
    n_days = max(BASE_DAYS, math.ceil(n_rows / (3 * 24 * 0.97)))
    cal = _calendar(n_days)
    w = _weather(rng, cal, n_days)

    # ---- rows: street x hour, a sample of the full grid (counter gaps) -----------------
    total = 3 * n_days * 24
    rows = (
        np.sort(rng.choice(total, size=n_rows, replace=False))
        if n_rows < total
        else np.arange(total)
    )
    h_idx, s = rows // 3, rows % 3
    base = PROFILE[s, cal.daytype[w.day[h_idx]], w.hour[h_idx]]
    truth = base * np.exp(_log_effect(cal, w, h_idx, s))
    noisy = truth * np.exp(rng.normal(0, NOISE_SD, n_rows) - NOISE_SD**2 / 2)
    target = np.round(np.round(noisy * REFERENCE[s]) / REFERENCE[s], 5)

    stamp = (START + h_idx.astype("timedelta64[h]")).astype("datetime64[s]")
    table = pd.DataFrame(
        {
            "id": np.char.add("wue_", np.char.zfill(np.arange(n_rows).astype(str), 6)).astype(
                object
            ),
            "street": STREETS[s].astype(object),
            "timestamp": np.char.replace(stamp.astype(str), "T", " ").astype(object),
            "weather_condition": w.label[h_idx],
            "temperature": w.temp_obs[h_idx],
            "target": target,
        }
    )
    return Twin(table=table, truth=pd.Series(truth, index=table.index, name="target"))
