# The regen image: the static binary and nothing else. This machine pulls
# no images, so there is no base image and no build stage; build it with
# scripts/build-image.sh, which compiles the binary (CGO_ENABLED=0) into
# its own small build context first.
FROM scratch

COPY regen /regen
# An empty /data owned by the unprivileged user: Docker seeds a new named
# volume with the ownership of the directory it is mounted over, so the
# servers can write their volumes without running as root.
COPY --chown=65534:65534 data /data

USER 65534:65534
ENV REGEN_DATA=/data
# No shell in the image: healthchecks run `regen health`.
HEALTHCHECK --interval=5s --timeout=4s --start-period=5s --retries=3 CMD ["/regen", "health"]
ENTRYPOINT ["/regen"]
CMD ["--help"]
