"""The long-form writing studio (seed 002): a book as versioned resources, curation,
profiles as of each chapter, and the three roles (A: context, B: builder, C: monitor).

A book lives in the data directory's SQLite database (``writing_*`` tables), addressed by
virtual paths under ``/meta``, ``/entities``, ``/manuscript``, ``/summaries`` and
``/profiles`` and by ``viking://`` URIs built from them (:mod:`storyloom.writing.uris`).
"""
