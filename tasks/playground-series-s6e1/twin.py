"""Offline twin of Kaggle Playground Series S6E1 (student exam scores).

``generate(n_rows, seed)`` returns students with the competition's columns and an
``exam_score`` between 19.6 and 100 (one decimal), plus the noise-free expected score.

No real data is available offline; value sets and ranges follow the competition's schema
(age 17-24; gender female/male/other; seven courses; study hours 0.08-7.91; class
attendance 40.6-99.4 %; internet access yes/no; sleep 4.1-9.9 h; sleep quality, study
method, facility rating and exam difficulty as categorical strings; score mean about 62,
standard deviation about 19).

Target = clip(mu + N(0, 8.8), 19.6, 100), rounded to 0.1. ``truth`` is the exact mean of
the clipped normal (closed form), so it is E[target | row]. Missing sleep hours, class
attendance or facility rating contribute their average effect, so mu depends on the
observed row only.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from runner.tasks.twins import Twin, clipped_normal_mean

FEATURES = (
    "age", "gender", "course", "study_hours", "class_attendance", "internet_access",
    "sleep_hours", "sleep_quality", "study_method", "facility_rating", "exam_difficulty",
)  # fmt: skip

GENDERS = np.array(["female", "male", "other"])
COURSES = np.array(["b.tech", "b.sc", "b.com", "bca", "bba", "ba", "diploma"])
COURSE_P = np.array([0.19, 0.17, 0.15, 0.15, 0.13, 0.11, 0.10])
COURSE_EFF = np.array([1.0, 0.5, 0.0, 0.5, -0.5, -1.0, -1.5])
SLEEP_QUALITY = np.array(["poor", "average", "good"])
METHODS = np.array(["self-study", "coaching", "mixed", "group study", "online videos"])
METHOD_P = np.array([0.22, 0.20, 0.20, 0.19, 0.19])
METHOD_EFF = np.array([0.0, 4.0, 3.0, 1.5, 1.0])
FACILITY = np.array(["low", "medium", "high"])
DIFFICULTY = np.array(["easy", "moderate", "hard"])
LO, HI = 19.6, 100.0
NOISE_SD = 8.8
INTERCEPT = 22.0  # sets the mean score to about 62
MISSING = {"sleep_hours": 0.02, "class_attendance": 0.015, "facility_rating": 0.02}


def generate(n_rows: int, seed: int) -> Twin:
    if n_rows <= 0:
        raise ValueError("n_rows must be positive")
    rng = np.random.default_rng(seed)
    n = n_rows

    age = rng.integers(17, 25, n)
    gender = rng.choice(3, size=n, p=[0.34, 0.34, 0.32])
    course = rng.choice(len(COURSES), size=n, p=COURSE_P)
    hours = np.round(np.clip(rng.gamma(4.0, 1.0, n), 0.08, 7.91), 2)
    attend = np.round(np.clip(rng.normal(72.0, 14.0, n), 40.6, 99.4), 1)
    internet = rng.random(n) < 0.92
    sleep = np.round(np.clip(rng.normal(7.0, 1.35, n), 4.1, 9.9), 1)
    quality = rng.choice(3, size=n, p=[0.30, 0.38, 0.32])
    method = rng.choice(len(METHODS), size=n, p=METHOD_P)
    facility = rng.choice(3, size=n, p=[0.30, 0.38, 0.32])
    difficulty = rng.choice(3, size=n, p=[0.26, 0.56, 0.18])

    m_sleep = rng.random(n) < MISSING["sleep_hours"]
    m_attend = rng.random(n) < MISSING["class_attendance"]
    m_fac = rng.random(n) < MISSING["facility_rating"]

    # ---- expected score from the observed row -----------------------------------------
    h = hours
    att = np.where(m_attend, 72.0, attend)
    hard = difficulty == 2
    sleep_eff = np.where(m_sleep, -2.4, -1.3 * np.minimum((sleep - 7.4) ** 2, 9.0))
    good_rest = (quality == 2) & ~m_sleep & (sleep >= 7.0)
    mu = (
        INTERCEPT
        + 12.5 * h - 0.55 * h**2  # diminishing returns of study time
        + 0.45 * (att - 70.0) + 0.12 * (att - 70.0) * hard  # attendance pays off most on hard exams
        + sleep_eff
        + np.array([-4.0, 0.0, 3.5])[quality] + 2.0 * good_rest
        + METHOD_EFF[method]
        + 3.0 * ((method == 1) & (h < 3.0))  # coaching rescues students who study little
        - 6.0 * ((method == 4) & ~internet)  # online videos without internet access
        - 1.0 * ~internet
        + np.where(m_fac, 0.0, np.array([-3.0, 0.0, 3.0])[facility])
        + np.array([4.5, 0.0, -7.0])[difficulty]
        + COURSE_EFF[course]
        + 0.25 * (age - 20)
    )  # fmt: skip
    truth = clipped_normal_mean(mu, NOISE_SD, LO, HI)
    score = np.round(np.clip(mu + rng.normal(0, NOISE_SD, n), LO, HI), 1)

    def cat(values: np.ndarray, idx: np.ndarray, missing: np.ndarray | None = None) -> np.ndarray:
        out = values[idx].astype(object)
        if missing is not None:
            out[missing] = np.nan
        return out

    table = pd.DataFrame(
        {
            "id": np.arange(n, dtype=np.int64),
            "age": age.astype(np.int64),
            "gender": cat(GENDERS, gender),
            "course": cat(COURSES, course),
            "study_hours": hours,
            "class_attendance": np.where(m_attend, np.nan, attend),
            "internet_access": np.where(internet, "yes", "no").astype(object),
            "sleep_hours": np.where(m_sleep, np.nan, sleep),
            "sleep_quality": cat(SLEEP_QUALITY, quality),
            "study_method": cat(METHODS, method),
            "facility_rating": cat(FACILITY, facility, m_fac),
            "exam_difficulty": cat(DIFFICULTY, difficulty),
            "exam_score": score,
        }
    )
    return Twin(table=table, truth=pd.Series(truth, index=table.index, name="exam_score"))
