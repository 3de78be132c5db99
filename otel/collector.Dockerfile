# The contrib collector image has no shell and no HTTP client, so nothing in it could run a health
# check: add a static busybox for `wget` against the health_check extension (port 13133).
FROM busybox:1.37-musl AS busybox
FROM otel/opentelemetry-collector-contrib:0.120.0
COPY --from=busybox /bin/busybox /busybox
