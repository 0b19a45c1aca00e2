"""The text source: documents -> read units -> tokens -> packed sequences (see source.py).

A packed sequence is the sample, so echo works as for images, with one difference of
meaning: text has no input augmentation, so `echo.stage: before_augment` and
`after_augment` are the same point of the pipeline (both repeat sequences in the
preprocessing actor, or on the reading worker under `factor: auto`), and a copy is
the identical token row; `batch` repeats whole batches on the worker. Batch
augmentation's M copies of a sequence differ only in their dropout masks.
"""
