"""``autotune serve``: a long-running process per host that keeps one warm ``Tuner`` per kernel file it was
started with and tunes the shape requests queued in the database (``store.services``).

- ``events``: its log lines (text, or one JSON object per line);
- ``validate``: a request is data from the database: checked like CLI input before anything runs;
- ``loop``: the service itself (start, heartbeats, take, tune, finish; SIGTERM)."""
