# S3 calls with botocore, as a plugin would make them. Reads a JSON job
# from argv[1] and prints one JSON result per case: the HTTP status, the
# X-Airlock-Error code and, for a get, whether the body came back intact.
import json
import sys

import botocore.session
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.exceptions import ClientError
from botocore.httpsession import URLLib3Session

job = json.loads(sys.argv[1])
proxies = job.get("proxies") or None
verify = job["ca"]


def client(signature_version="s3v4"):
    cfg = Config(
        s3={"addressing_style": "path"},
        signature_version=signature_version,
        retries={"total_max_attempts": 1},
        max_pool_connections=1,  # every call on one connection
        connect_timeout=10,
        read_timeout=job["read_timeout"],
        proxies=proxies,
    )
    return botocore.session.get_session().create_client(
        "s3",
        region_name=job["region"],
        endpoint_url=job["endpoint"],
        aws_access_key_id=job["key_id"],
        aws_secret_access_key=job["secret"],
        verify=verify,
        config=cfg,
    )


s3 = client()
results = []
for case in job["cases"]:
    op, out = case["op"], {"status": 0, "code": "", "error": ""}
    try:
        if op == "put":
            r = s3.put_object(Bucket=job["bucket"], Key=case["key"], Body=case["body"].encode())
        elif op == "get":
            r = s3.get_object(Bucket=job["bucket"], Key=case["key"], **case.get("params", {}))
            out["intact"] = r["Body"].read().decode() == case["body"]
        elif op == "list":
            r = s3.list_objects_v2(Bucket=job["bucket"], Prefix=case["prefix"], StartAfter=case["prefix"])
        elif op in ("presign", "presign-v2"):
            c = s3 if op == "presign" else client("s3")
            u = c.generate_presigned_url("get_object", Params={"Bucket": job["bucket"], "Key": case["key"]})
            resp = URLLib3Session(verify=verify, proxies=proxies).send(AWSRequest("GET", u).prepare())
            out["status"], out["code"] = resp.status_code, resp.headers.get("x-airlock-error", "")
            results.append(out)
            continue
        out["status"] = r["ResponseMetadata"]["HTTPStatusCode"]
    except ClientError as e:
        md = e.response["ResponseMetadata"]
        out["status"], out["code"] = md["HTTPStatusCode"], md["HTTPHeaders"].get("x-airlock-error", "")
    except Exception as e:  # a timeout or a connection error: say which
        out["error"] = type(e).__name__
    results.append(out)
print(json.dumps(results))
