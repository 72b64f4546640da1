"""Offline twin of the Kaggle competition "bank-customer-churn-ict-u-ai".

``generate(n_rows, seed)`` returns a bank-churn table with the competition's columns
(id, the 12 features, Exited) and the true churn probability of every row.

Calibration: the marginals below were measured once on the real "Churn Modelling" table
(``shared/data/churn_modelling.csv``, 10,000 customers, 20.4 % churners) and are hard-coded
here; the generator never reads that file.

* Geography France 50.1 % / Germany 25.1 % / Spain 24.8 %; Male 54.6 %.
* Age: 18 + lognormal(log 19, 0.46), integer, clipped to 18..92 (real quartiles 32/37/44).
* CreditScore: normal(650, 97) rounded, clipped to 350..850 (2 % pile-up at 850).
* Tenure 0..10, 0 and 10 half as common as 1..9.
* Balance: exactly 0 for 48 % of French and Spanish customers and never for German ones;
  otherwise normal(119_800, 30_000).
* NumOfProducts given Balance == 0: 1/2/3/4 = 25/72/2.7/0.4 %; given Balance > 0:
  65.5/31.2/2.6/0.7 %.  HasCrCard 70.6 %, IsActiveMember 51.5 %.
* EstimatedSalary uniform on 11.58..199_992.48.
* CustomerId 8-digit numbers from 15_565_701 upwards; Surname from the most common names.
* Churn effects follow the real table's shape: a hump in age (peak ~50-58), 3-4 products
  very risky, 2 products safe, inactive members, Germany and women churn more.

The outcome depends only on what the table shows (missing values included: a missing
CreditScore or Tenure simply contributes nothing), so ``truth`` is exactly P(Exited = 1 | row).
Surname and CustomerId carry no signal.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from runner.tasks.twins import Twin

FEATURES = (
    "CustomerId", "Surname", "CreditScore", "Geography", "Gender", "Age", "Tenure", "Balance",
    "NumOfProducts", "HasCrCard", "IsActiveMember", "EstimatedSalary",
)  # fmt: skip

GEOGRAPHY = np.array(["France", "Germany", "Spain"])
GEOGRAPHY_P = np.array([0.5014, 0.2509, 0.2477])
P_MALE = 0.5457
TENURE_W = np.array([0.5, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0.5])
P_ZERO_BALANCE = {"France": 0.482, "Germany": 0.0, "Spain": 0.484}
PRODUCTS_P_ZERO = np.array([0.250, 0.719, 0.027, 0.004])
PRODUCTS_P_POS = np.array([0.655, 0.312, 0.026, 0.007])

# The most frequent surnames of the real table (weights fall off like a Zipf law).
SURNAMES = np.array(
    """Smith Scott Martin Walker Brown Genovese Shih Yeh Wright Maclean Ma Wilson Fanucci White
    Johnson Lu Wang Moore Chu McGregor Mai Sun Thompson Fang Trevisani Kennedy Shen Jamieson
    Mitchell Palerma Kerr Watson Lo Kao Miller Hughes Graham Young Crawford McKay Lung Anderson
    Wei Ko Bergamaschi Pan Tuan Duncan McDonald Wallace Cameron Gordon Pai Sung He Fleming King
    Hsia Ross Tu Lin Mao Tien Burns Hill Endrizzi Cocci Tsao Davidson McIntyre Chiu Shaw Feng
    Manna Chung Boyle Findlay Greco Grant Tang Wan Johnston Gibson Hsing Manfrin Yao Henderson
    Stevenson Robertson Kung Hsieh Trevisano McKenzie Fu Chin Ferri Pisano Su Forbes Ku
    Johnstone Clark Wu Calabresi Allan Sinclair Hamilton Thomson Murray Douglas Marshall Black
    Lombardo Hsiung Mazzanti Taylor Cattaneo Teng Hung Wood Fiorentini Chuang Sutherland Chiang
    Tan Kang Fan Pirozzi Boni Buccho Meng Capon Yen Rossi Hsueh Simmons Pinto Chia Williamson
    Fraser McMillan Liang Chang Hunter Milne Niu Onio Hargrave Obinna Chikezie Okwudili Nwachukwu
    Azikiwe Onwuamaeze Ozioma Kuznetsov Ivanova Sokolov Lebedev Volkov Morozov Bellucci Moretti
    Ferrari Esposito Romano Colombo Ricci Marino Bruno Gallo Conti Costa""".split()  # noqa: SIM905
)
_SURNAME_W = 1.0 / (np.arange(len(SURNAMES)) + 8.0)
SURNAME_P = _SURNAME_W / _SURNAME_W.sum()

INTERCEPT = -1.05  # sets the churn base rate to about 20 % (real table: 20.4 %)
MISSING = {"CreditScore": 0.02, "Tenure": 0.03, "EstimatedSalary": 0.015, "Geography": 0.01}


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def generate(n_rows: int, seed: int) -> Twin:
    if n_rows <= 0:
        raise ValueError("n_rows must be positive")
    rng = np.random.default_rng(seed)
    n = n_rows

    geo = rng.choice(GEOGRAPHY, size=n, p=GEOGRAPHY_P)
    male = rng.random(n) < P_MALE
    age = np.clip(np.round(18 + np.exp(rng.normal(np.log(19.0), 0.46, n))), 18, 92)
    credit = np.clip(np.round(rng.normal(650.0, 97.0, n)), 350, 850)
    tenure = rng.choice(11, size=n, p=TENURE_W / TENURE_W.sum()).astype(float)
    p_zero = np.select([geo == "France", geo == "Spain"], [0.482, 0.484], 0.0)
    zero_bal = rng.random(n) < p_zero
    balance = np.where(
        zero_bal, 0.0, np.round(np.clip(rng.normal(119_800.0, 30_000.0, n), 3_000, 251_000), 2)
    )
    u = rng.random(n)
    cum = np.where(zero_bal[:, None], np.cumsum(PRODUCTS_P_ZERO), np.cumsum(PRODUCTS_P_POS))
    products = 1 + (u[:, None] > cum[:, :3]).sum(axis=1)
    has_card = (rng.random(n) < 0.7055).astype(int)
    active = (rng.random(n) < 0.5151).astype(int)
    salary = np.round(rng.uniform(11.58, 199_992.48, n), 2)
    cust_span = max(250_000, 4 * n)
    customer_id = 15_565_701 + rng.choice(cust_span, size=n, replace=False)
    surname = rng.choice(SURNAMES, size=n, p=SURNAME_P)

    # Missing values (recorded as NaN / empty in the table).
    miss = {c: rng.random(n) < p for c, p in MISSING.items()}
    credit_obs = np.where(miss["CreditScore"], np.nan, credit)
    tenure_obs = np.where(miss["Tenure"], np.nan, tenure)
    salary_obs = np.where(miss["EstimatedSalary"], np.nan, salary)
    geo_obs = geo.astype(object)
    geo_obs[miss["Geography"]] = np.nan

    # ---- true log-odds, from observed values only --------------------------------------
    a = age
    age_eff = 3.9 * np.exp(-(((a - 54.0) / 9.5) ** 2)) - 0.045 * np.clip(38.0 - a, 0, None) - 1.05
    prod_eff = np.select([products == 1, products == 2, products == 3], [0.0, -1.8, 3.0], 5.0)
    # Inactive members of 40+ are the classic churners; activity matters little for the young.
    act_eff = np.where(active == 1, -0.5 - 1.1 * np.clip((a - 35.0) / 15.0, 0, 1), 0.0)
    geo_eff = np.select([geo_obs == "Germany", geo_obs == "Spain"], [0.75, 0.05], 0.0)
    geo_eff = np.where(miss["Geography"], 0.2, geo_eff)
    sex_eff = np.where(male, 0.0, 0.5)
    # Balance: a high, unused balance with a single product looks like money about to move.
    bal_k = balance / 100_000.0
    bal_eff = np.where(balance > 0, 0.15 + 0.35 * np.clip(bal_k - 1.0, 0, 1) * (products == 1), 0.0)
    cs = np.nan_to_num(credit_obs, nan=650.0)
    credit_eff = 0.55 * np.clip((560.0 - cs) / 160.0, 0, 1)
    ten = np.nan_to_num(tenure_obs, nan=5.0)
    tenure_eff = np.where(ten <= 1, 0.15, 0.0)
    logit = (
        INTERCEPT + age_eff + prod_eff + act_eff + geo_eff + sex_eff + bal_eff + credit_eff
        + tenure_eff
    )  # fmt: skip
    p = _sigmoid(logit)
    exited = (rng.random(n) < p).astype(int)

    table = pd.DataFrame(
        {
            "id": np.arange(n, dtype=np.int64),
            "CustomerId": customer_id.astype(np.int64),
            "Surname": surname,
            "CreditScore": credit_obs,
            "Geography": geo_obs,
            "Gender": np.where(male, "Male", "Female"),
            "Age": age.astype(np.int64),
            "Tenure": tenure_obs,
            "Balance": balance,
            "NumOfProducts": products.astype(np.int64),
            "HasCrCard": has_card,
            "IsActiveMember": active,
            "EstimatedSalary": salary_obs,
            "Exited": exited,
        }
    )
    return Twin(table=table, truth=pd.Series(p, index=table.index, name="Exited"))
