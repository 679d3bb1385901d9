"""The forms events take between the layers, below ingress, operators and the engine: the row
tuples both runtimes feed in (``rows``), their Arrow layouts (``layout``), the event frames and
chunks operators pass each other (``frame``), payloads as JSON text (``json_text``), a payload
field's numbers (``numbers``), the payload fields a stream is known to have (``schema``) and the
rule by which an edge end finds its start (``edges``)."""
