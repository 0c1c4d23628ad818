# kubesched as a container: `kubesched run` with kube-scheduler's flags.
#   docker build -t kubesched:dev .
#   docker run --rm kubesched:dev --version
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY kubesched ./kubesched
RUN pip install . && rm -rf /src

WORKDIR /
# An unprivileged user; the secure port (10259) needs no privileges.
USER 65532:65532
EXPOSE 10259
ENTRYPOINT ["kubesched", "run"]
CMD ["--config=/etc/kubesched/config.yaml"]
