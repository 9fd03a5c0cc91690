from stacklab.knobs import Knob

COMPONENT = "py-http"
KNOBS = [
    Knob(COMPONENT, "keepalive", bool, True, "Answer in HTTP/1.1, keeping connections open "
         "(--protocol HTTP/1.1); off: HTTP/1.0, one response per connection."),
]
