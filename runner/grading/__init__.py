"""Strict grading of an agent's submission against the private answers.

The grader runs outside the sandbox and treats the submission file as untrusted data: it
never follows a symlink, never opens a FIFO or device, reads at most a size cap of bytes,
and turns every problem with the file into :class:`InvalidSubmission` with a stable reason
code (see :data:`REASON_CODES`) and a message a person understands. Problems with the
*answers* or the task spec are the harness's fault and raise ``HarnessError``/``SpecError``
instead, so they are never blamed on the agent.

Checks, in order (the first failure is reported):

``missing_file`` → ``not_regular_file`` → ``too_large`` → ``unreadable_csv`` →
``missing_id_column`` → ``wrong_columns`` → ``wrong_row_count`` → ``missing_ids`` →
``duplicate_ids`` → ``id_mismatch`` → ``non_numeric_predictions`` → ``missing_predictions``
→ ``non_finite_predictions`` → ``out_of_range_predictions``, then, when scoring,
``non_finite_score``; anything unexpected becomes ``invalid``.

Predictions may be any finite float64 (as on Kaggle): 1e308, -0.0 and subnormals pass
validation, and text beyond the float range (``1e999``) is ``non_finite_predictions``. The
metric is float64 arithmetic, so finite predictions far from the target's scale can still
make it overflow (RMSE of one 1e160 is inf). Whose fault that is gets decided against a
reference: the metric on the worst predictions *inside the answers' range* (each row
predicted with whichever of the answers' min and max is farther from its answer). If that
is finite, no in-range submission can overflow, so a non-finite score comes from the
predictions: ``non_finite_score``, naming the largest one. If it is not, the answers (or
the metric chosen for them) are at fault: ``HarnessError``.

Lines longer than :data:`MAX_LINE_BYTES` are ``unreadable_csv`` with the line named (a CSV
row of an id and a number is never that long); the limit is checked before parsing, so
every line within it parses.

Tolerated on purpose: a UTF-8 byte-order mark, CRLF line ends, blank lines, quoted fields,
any column order, surrounding whitespace in header names, ids and predictions (it is
stripped), and (when every test id is a canonical integer) ids written as integral
numbers such as ``12.0``, ``+12`` or ``012``.

The file is parsed with pyarrow's CSV reader with every column read as text, so nothing is
silently coerced; predictions are then converted with a strict text-to-float cast.

Fingerprints (see ``runner.grading.fingerprint``): the sha256 of the bytes the grader read rides on
:class:`GradeResult` and on every :class:`InvalidSubmission` raised after the read, and a
scored submission also gets the sha256 of its canonical form. :func:`hash_submission_file`
hashes a file that is not graded through the same guarded open.

Where each step lives: ``guarded_open`` (opening the file as untrusted data, the size cap),
``reading`` and ``csv_scan`` (bytes → a table of text), ``validation`` (columns, ids,
predictions), ``scoring`` (the metric, and whose fault a non-finite score is), ``answers``
(the trusted side) and ``invalid`` (reason codes and messages).
"""

from runner.grading.answers import load_answers
from runner.grading.guarded_open import default_max_bytes, hash_submission_file
from runner.grading.invalid import REASON_CODES, InvalidSubmission
from runner.grading.scoring import GradeResult, grade_submission, validate_submission

__all__ = [
    "REASON_CODES",
    "GradeResult",
    "InvalidSubmission",
    "default_max_bytes",
    "grade_submission",
    "hash_submission_file",
    "load_answers",
    "validate_submission",
]
