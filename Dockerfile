# mindtune console image (CPU). Build: docker build -t mindtune .   Run: docker run -p 7860:7860 mindtune
FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 GLOG_v=3
WORKDIR /opt/mindtune
# g++ builds the CPU's fused kernels on first use (core/fused.py)
RUN apt-get update && apt-get install -y --no-install-recommends g++ && rm -rf /var/lib/apt/lists/*
COPY requirements.txt .
RUN pip install --no-cache-dir -r requirements.txt
COPY app ./app
COPY core ./core
COPY configs ./configs
COPY models ./models
COPY data ./data
EXPOSE 7860
CMD ["python", "-m", "app"]
