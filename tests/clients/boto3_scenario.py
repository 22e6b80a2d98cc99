"""boto3 scenario of tests/clients/run.sh: multipart upload and download,
listing with pagination, copy, multi-delete, presigned GET and PUT,
conditional write, checksums, GET by part number, metadata names,
version listings, url-encoded listings, object attributes, public-read
with anonymous reads, ownership controls, a key with rights on a prefix
and a policy naming it, and refused sub-resources and
encryption (SSE-S3, SSE-C; SSE-KMS refused), versioning (old
versions, delete markers, version listings) and object lock (retention,
legal hold, locked versions refused deletion) against a running regen.

usage: boto3_scenario.py ENDPOINT WORKDIR (credentials from AWS_* env)
"""

import datetime
import hashlib
import os
import sys
import urllib.error
import urllib.request

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError


def check(cond, what):
    if not cond:
        raise SystemExit("FAILED: " + what)
    print("ok:", what)


def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def error_code(fn):
    try:
        fn()
    except ClientError as e:
        return e.response["Error"]["Code"]
    return None


def anonymous(url, method="GET"):
    """Status and body of an unsigned request."""
    return anonymous_req(urllib.request.Request(url, method=method))


def anonymous_req(req):
    try:
        with urllib.request.urlopen(req) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def compat(s3, endpoint, bucket):
    """What boto3 users and test suites broke on: metadata names, version
    listings of unversioned buckets, url-encoded listings, max-keys=0,
    GetObjectAttributes, public-read with anonymous reads."""
    s3.put_object(Bucket=bucket, Key="meta", Body=b"m", Metadata={"key1": "value1", "Mixed": "v"})
    got = s3.head_object(Bucket=bucket, Key="meta")["Metadata"]
    check(got == {"key1": "value1", "mixed": "v"}, "user metadata names as stored: %r" % got)
    s3.copy_object(Bucket=bucket, Key="meta2", CopySource={"Bucket": bucket, "Key": "meta"})
    check(s3.head_object(Bucket=bucket, Key="meta2")["Metadata"] == {"key1": "value1", "mixed": "v"}, "metadata after copy (COPY)")
    s3.copy_object(Bucket=bucket, Key="meta3", CopySource={"Bucket": bucket, "Key": "meta"},
                   MetadataDirective="REPLACE", Metadata={"key2": "value2"})
    check(s3.head_object(Bucket=bucket, Key="meta3")["Metadata"] == {"key2": "value2"}, "metadata after copy (REPLACE)")

    for k in ["ver/a", "ver/b b", "ver/c+c"]:
        s3.put_object(Bucket=bucket, Key=k, Body=k.encode())
    pages = s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix="ver/", PaginationConfig={"PageSize": 2})
    vers = [(v["Key"], v["VersionId"], v["IsLatest"]) for p in pages for v in p.get("Versions", [])]
    check(vers == [("ver/a", "null", True), ("ver/b b", "null", True), ("ver/c+c", "null", True)],
          "list_object_versions pages through the null versions: %r" % vers)

    # boto3 asks for encoding-type=url on its own and decodes what S3 encodes.
    r = s3.list_objects(Bucket=bucket, Prefix="ver/b ", Delimiter="/")
    check(r["Prefix"] == "ver/b " and [o["Key"] for o in r["Contents"]] == ["ver/b b"], "list_objects Prefix as sent: %r" % r["Prefix"])
    r = s3.list_objects_v2(Bucket=bucket, Prefix="ver/c+")
    check(r["Prefix"] == "ver/c+" and [o["Key"] for o in r["Contents"]] == ["ver/c+c"], "list_objects_v2 with '+': %r" % r["Prefix"])
    r = s3.list_objects(Bucket=bucket, Delimiter="/", EncodingType="url", Prefix="ver/")
    check(r["Prefix"] == "ver/" and "ver/b%20b" in [o["Key"] for o in r["Contents"]] and "ver/c%2Bc" in [o["Key"] for o in r["Contents"]],
          "explicit encoding-type=url keys: %r" % [o["Key"] for o in r["Contents"]])
    r = s3.list_objects_v2(Bucket=bucket, MaxKeys=0)
    check(r["IsTruncated"] is False and r["KeyCount"] == 0, "max-keys=0 is an empty untruncated page")

    a = s3.get_object_attributes(Bucket=bucket, Key="dir/mid.bin", ObjectAttributes=["ETag", "ObjectSize", "ObjectParts", "StorageClass"], MaxParts=2)
    check(a["ETag"].endswith("-5") and a["ObjectSize"] == s3.head_object(Bucket=bucket, Key="dir/mid.bin")["ContentLength"]
          and a["ObjectParts"]["TotalPartsCount"] == 5 and a["ObjectParts"]["IsTruncated"] and len(a["ObjectParts"]["Parts"]) == 2,
          "get_object_attributes")

    s3.create_bucket(Bucket="boto3-public", ACL="public-read")
    s3.put_object(Bucket="boto3-public", Key="page.html", Body=b"<p>hi</p>", ACL="public-read", ContentType="text/html")
    s3.put_object(Bucket="boto3-public", Key="secret", Body=b"s")
    check(anonymous(endpoint + "/boto3-public/page.html") == (200, b"<p>hi</p>"), "anonymous GET of a public-read object")
    check(anonymous(endpoint + "/boto3-public/secret")[0] == 403, "anonymous GET of a private object is refused")
    status, body = anonymous(endpoint + "/boto3-public?list-type=2")
    check(status == 200 and b"<Key>secret</Key>" in body, "anonymous listing of a public-read bucket")
    grants = s3.get_object_acl(Bucket="boto3-public", Key="page.html")["Grants"]
    check(any(g["Grantee"].get("URI", "").endswith("/AllUsers") and g["Permission"] == "READ" for g in grants), "get_object_acl shows the public grant")
    s3.put_bucket_ownership_controls(Bucket=bucket, OwnershipControls={"Rules": [{"ObjectOwnership": "BucketOwnerEnforced"}]})
    check(s3.get_bucket_ownership_controls(Bucket=bucket)["OwnershipControls"]["Rules"] == [{"ObjectOwnership": "BucketOwnerEnforced"}],
          "ownership controls round trip")
    s3.delete_bucket_ownership_controls(Bucket=bucket)
    s3.delete_objects(Bucket="boto3-public", Delete={"Objects": [{"Key": "page.html"}, {"Key": "secret"}]})
    s3.delete_bucket(Bucket="boto3-public")


def tagging(s3, bucket):
    """Object and bucket tags, with S3's limits."""
    s3.put_object(Bucket=bucket, Key="tagged", Body=b"hello", Tagging="project=regen&team=storage")
    h = s3.head_object(Bucket=bucket, Key="tagged")
    check(h["ResponseMetadata"]["HTTPHeaders"].get("x-amz-tagging-count") == "2", "x-amz-tagging-count on HEAD")
    check(s3.get_object(Bucket=bucket, Key="tagged")["TagCount"] == 2, "TagCount on GET")
    got = s3.get_object_tagging(Bucket=bucket, Key="tagged")["TagSet"]
    check(got == [{"Key": "project", "Value": "regen"}, {"Key": "team", "Value": "storage"}], "get_object_tagging: %r" % got)
    etag = h["ETag"]
    s3.put_object_tagging(Bucket=bucket, Key="tagged", Tagging={"TagSet": [{"Key": "only", "Value": "one"}]})
    check(s3.get_object_tagging(Bucket=bucket, Key="tagged")["TagSet"] == [{"Key": "only", "Value": "one"}], "put_object_tagging replaces the tags")
    check(s3.get_object(Bucket=bucket, Key="tagged")["Body"].read() == b"hello" and s3.head_object(Bucket=bucket, Key="tagged")["ETag"] == etag,
          "put_object_tagging leaves the data")
    code = error_code(lambda: s3.put_object_tagging(Bucket=bucket, Key="tagged",
                                                   Tagging={"TagSet": [{"Key": "k%d" % i, "Value": "v"} for i in range(11)]}))
    check(code == "BadRequest", "11 object tags refused: %s" % code)
    code = error_code(lambda: s3.put_object_tagging(Bucket=bucket, Key="tagged", Tagging={"TagSet": [{"Key": "k" * 129, "Value": "v"}]}))
    check(code == "InvalidTag", "129-character tag key refused: %s" % code)
    s3.delete_object_tagging(Bucket=bucket, Key="tagged")
    check(s3.get_object_tagging(Bucket=bucket, Key="tagged")["TagSet"] == [], "delete_object_tagging")
    check(error_code(lambda: s3.get_bucket_tagging(Bucket=bucket)) == "NoSuchTagSet", "no bucket tags yet: NoSuchTagSet")
    s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": [{"Key": "cost-center", "Value": "42"}]})
    check(s3.get_bucket_tagging(Bucket=bucket)["TagSet"] == [{"Key": "cost-center", "Value": "42"}], "bucket tagging round trip")
    s3.delete_bucket_tagging(Bucket=bucket)
    check(error_code(lambda: s3.get_bucket_tagging(Bucket=bucket)) == "NoSuchTagSet", "delete_bucket_tagging")


def cors(s3, endpoint, bucket):
    """Bucket CORS rules and a preflight answered from them."""
    check(error_code(lambda: s3.get_bucket_cors(Bucket=bucket)) == "NoSuchCORSConfiguration", "no CORS rules yet")
    rules = [{"AllowedOrigins": ["https://app.example.com"], "AllowedMethods": ["GET", "PUT"],
              "AllowedHeaders": ["*"], "ExposeHeaders": ["ETag"], "MaxAgeSeconds": 300}]
    s3.put_bucket_cors(Bucket=bucket, CORSConfiguration={"CORSRules": rules})
    check(s3.get_bucket_cors(Bucket=bucket)["CORSRules"] == rules, "CORS rules round trip")
    req = urllib.request.Request(endpoint + "/" + bucket + "/x", method="OPTIONS",
                                 headers={"Origin": "https://app.example.com", "Access-Control-Request-Method": "PUT"})
    with urllib.request.urlopen(req) as r:
        check(r.status == 200 and r.headers["Access-Control-Allow-Origin"] == "https://app.example.com", "preflight allowed by the rule")
    req = urllib.request.Request(endpoint + "/" + bucket + "/x", method="OPTIONS",
                                 headers={"Origin": "https://other.example.com", "Access-Control-Request-Method": "PUT"})
    check(anonymous_req(req)[0] == 403, "preflight from another origin refused")
    s3.delete_bucket_cors(Bucket=bucket)
    check(error_code(lambda: s3.get_bucket_cors(Bucket=bucket)) == "NoSuchCORSConfiguration", "delete_bucket_cors")


def policy(s3, endpoint, bucket):
    """A bucket policy making one prefix public, and one boto3 cannot set."""
    import json
    s3.put_object(Bucket=bucket, Key="www/index.html", Body=b"<h1>public</h1>")
    s3.put_object(Bucket=bucket, Key="internal.txt", Body=b"internal")
    doc = json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "arn:aws:s3:::%s/www/*" % bucket}]})
    s3.put_bucket_policy(Bucket=bucket, Policy=doc)
    check(s3.get_bucket_policy(Bucket=bucket)["Policy"] == doc, "bucket policy round trip")
    check(s3.get_bucket_policy_status(Bucket=bucket)["PolicyStatus"]["IsPublic"] is True, "policy status: public")
    check(anonymous(endpoint + "/%s/www/index.html" % bucket) == (200, b"<h1>public</h1>"), "anonymous GET allowed by the policy")
    check(anonymous(endpoint + "/%s/internal.txt" % bucket)[0] == 403, "anonymous GET outside the policy refused")
    bad = json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::123456789012:root"}, "Action": "s3:GetObject",
        "Resource": "arn:aws:s3:::%s/*" % bucket}]})
    check(error_code(lambda: s3.put_bucket_policy(Bucket=bucket, Policy=bad)) == "MalformedPolicy",
          "a principal regen cannot enforce is refused")
    s3.delete_bucket_policy(Bucket=bucket)
    check(error_code(lambda: s3.get_bucket_policy(Bucket=bucket)) == "NoSuchBucketPolicy", "delete_bucket_policy")
    check(anonymous(endpoint + "/%s/www/index.html" % bucket)[0] == 403, "private again without the policy")


def prefix_rights(s3, endpoint, work):
    """A stored key with rights on one prefix (made with `regen admin`, the
    binary run.sh built): allowed inside it, 403 outside it, listings of
    the whole bucket included; a bucket policy naming the key by ARN gives
    it another prefix, and anonymous callers nothing."""
    import json
    import subprocess
    bucket = "boto3-team"
    s3.create_bucket(Bucket=bucket)
    for k in ["mine/a.txt", "theirs/b.txt", "granted/c.txt"]:
        s3.put_object(Bucket=bucket, Key=k, Body=k.encode())
    env = dict(os.environ, REGEN_ENDPOINT=endpoint)
    regen = [os.path.join(work, "bin", "regen"), "admin"]
    key = json.loads(subprocess.run(regen + ["key", "create", "--name", "boto3-prefix", "--json"],
                                    env=env, check=True, capture_output=True, text=True).stdout)
    out = subprocess.run(regen + ["key", "grant", "boto3-prefix", "--bucket", bucket + "/mine/", "--right", "read,write"],
                         env=env, check=True, capture_output=True, text=True).stdout
    check(bucket + "/mine/:read,write" in out, "key grant on a prefix: " + out.strip())
    k = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                     aws_access_key_id=key["access_key"], aws_secret_access_key=key["secret_key"],
                     config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
    check(k.get_object(Bucket=bucket, Key="mine/a.txt")["Body"].read() == b"mine/a.txt", "prefix key reads inside its prefix")
    k.put_object(Bucket=bucket, Key="mine/new.txt", Body=b"new")
    got = [o["Key"] for o in k.list_objects_v2(Bucket=bucket, Prefix="mine/")["Contents"]]
    check(got == ["mine/a.txt", "mine/new.txt"], "prefix key lists its prefix: %r" % got)
    check(error_code(lambda: k.get_object(Bucket=bucket, Key="theirs/b.txt")) == "AccessDenied", "prefix key refused outside")
    check(error_code(lambda: k.put_object(Bucket=bucket, Key="theirs/x", Body=b"x")) == "AccessDenied", "prefix key cannot write outside")
    check(error_code(lambda: k.list_objects_v2(Bucket=bucket)) == "AccessDenied", "prefix key cannot list the whole bucket")
    check(error_code(lambda: k.list_objects_v2(Bucket=bucket, Prefix="theirs/")) == "AccessDenied", "prefix key cannot list another prefix")
    check(error_code(lambda: k.get_object(Bucket=bucket, Key="granted/c.txt")) == "AccessDenied", "no right on granted/ before the policy")
    doc = json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"AWS": ["arn:aws:iam::000000000000:user/" + key["access_key"]]},
        "Action": "s3:GetObject", "Resource": "arn:aws:s3:::%s/granted/*" % bucket}]})
    s3.put_bucket_policy(Bucket=bucket, Policy=doc)
    check(k.get_object(Bucket=bucket, Key="granted/c.txt")["Body"].read() == b"granted/c.txt", "a policy naming the key lets it read")
    check(anonymous(endpoint + "/%s/granted/c.txt" % bucket)[0] == 403, "the policy naming a key gives anonymous callers nothing")
    check(s3.get_bucket_policy_status(Bucket=bucket)["PolicyStatus"]["IsPublic"] is False, "a policy naming keys is not public")
    subprocess.run(regen + ["key", "delete", "boto3-prefix"], env=env, check=True, capture_output=True)
    s3.delete_bucket_policy(Bucket=bucket)
    for o in s3.list_objects_v2(Bucket=bucket)["Contents"]:
        s3.delete_object(Bucket=bucket, Key=o["Key"])
    s3.delete_bucket(Bucket=bucket)


def encryption(s3, bucket):
    """SSE-S3 and SSE-C round trips; SSE-KMS refused, not stored unencrypted."""
    body = os.urandom(100 << 10)
    s3.put_object(Bucket=bucket, Key="enc-s3", Body=body, ServerSideEncryption="AES256")
    got = s3.get_object(Bucket=bucket, Key="enc-s3")
    check(got["Body"].read() == body and got.get("ServerSideEncryption") == "AES256", "SSE-S3 read back")
    key = os.urandom(32)
    sse_c = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": key}
    s3.put_object(Bucket=bucket, Key="enc-c", Body=body, **sse_c)
    got = s3.get_object(Bucket=bucket, Key="enc-c", Range="bytes=70000-70009", **sse_c)
    check(got["Body"].read() == body[70000:70010], "SSE-C range read back with its key")
    code = error_code(lambda: s3.get_object(Bucket=bucket, Key="enc-c"))
    check(code in ("InvalidRequest", "400", "BadRequest"), "SSE-C object without its key refused: " + str(code))
    code = error_code(lambda: s3.put_object(Bucket=bucket, Key="enc-kms", Body=b"x", ServerSideEncryption="aws:kms"))
    check(code == "NotImplemented", "SSE-KMS refused, not stored unencrypted: " + str(code))
    check(error_code(lambda: s3.head_object(Bucket=bucket, Key="enc-kms")) in ("404", "NoSuchKey"), "refused SSE-KMS object absent")
    s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "enc-s3"}, {"Key": "enc-c"}], "Quiet": True})


def versioning(s3):
    """Enable versioning, put twice, list versions, get the old version,
    delete (a marker), delete the marker by ID (the object is back), then
    remove every version so the bucket can go."""
    bucket = "boto3-versioned"
    s3.create_bucket(Bucket=bucket)
    check(s3.get_bucket_versioning(Bucket=bucket).get("Status") is None, "new bucket has no versioning status")
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    check(s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled", "versioning enabled")
    v1 = s3.put_object(Bucket=bucket, Key="doc", Body=b"first")["VersionId"]
    v2 = s3.put_object(Bucket=bucket, Key="doc", Body=b"second")["VersionId"]
    check(v1 and v2 and v1 != v2 and "null" not in (v1, v2), "PUTs answer distinct version IDs")
    vs = s3.list_object_versions(Bucket=bucket)
    check([(v["VersionId"], v["IsLatest"]) for v in vs.get("Versions", [])] == [(v2, True), (v1, False)],
          "list_object_versions: newest first, latest marked")
    check(s3.get_object(Bucket=bucket, Key="doc", VersionId=v1)["Body"].read() == b"first", "get the old version by ID")
    dm = s3.delete_object(Bucket=bucket, Key="doc")
    check(dm.get("DeleteMarker") is True and dm.get("VersionId"), "DELETE writes a delete marker")
    check(error_code(lambda: s3.get_object(Bucket=bucket, Key="doc")) == "NoSuchKey", "deleted key is NoSuchKey")
    vs = s3.list_object_versions(Bucket=bucket)
    check([m["VersionId"] for m in vs.get("DeleteMarkers", [])] == [dm["VersionId"]] and len(vs.get("Versions", [])) == 2,
          "the marker is listed over both versions")
    s3.delete_object(Bucket=bucket, Key="doc", VersionId=dm["VersionId"])
    check(s3.get_object(Bucket=bucket, Key="doc")["Body"].read() == b"second", "deleting the marker brings the object back")
    check(error_code(lambda: s3.delete_bucket(Bucket=bucket)) == "BucketNotEmpty", "a bucket with versions is not empty")
    s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "doc", "VersionId": v} for v in (v1, v2)], "Quiet": True})
    check(not s3.list_object_versions(Bucket=bucket).get("Versions"), "every version removed")
    s3.delete_bucket(Bucket=bucket)


def object_lock(s3):
    """Create a lock bucket, put with GOVERNANCE retention, see the
    version refused deletion (alone and in delete_objects), a legal hold
    on and off, a default retention, object lock turned on for a bucket
    once its versioning is Enabled (refused before); then remove
    everything with the governance bypass so the bucket can go."""
    bucket = "boto3-locked"
    s3.create_bucket(Bucket=bucket, ObjectLockEnabledForBucket=True)
    check(s3.get_bucket_versioning(Bucket=bucket)["Status"] == "Enabled", "a lock bucket is versioned")
    conf = s3.get_object_lock_configuration(Bucket=bucket)["ObjectLockConfiguration"]
    check(conf["ObjectLockEnabled"] == "Enabled" and "Rule" not in conf, "object lock enabled, no default")
    check(error_code(lambda: s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Suspended"}))
          == "InvalidBucketState", "a lock bucket's versioning cannot be suspended")
    until = (datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(hours=1)).replace(microsecond=0)
    v = s3.put_object(Bucket=bucket, Key="doc", Body=b"locked", ObjectLockMode="GOVERNANCE",
                      ObjectLockRetainUntilDate=until)["VersionId"]
    ret = s3.get_object_retention(Bucket=bucket, Key="doc", VersionId=v)["Retention"]
    check(ret["Mode"] == "GOVERNANCE" and ret["RetainUntilDate"] == until, "retention read back: %s" % ret)
    head = s3.head_object(Bucket=bucket, Key="doc")
    check(head.get("ObjectLockMode") == "GOVERNANCE" and head.get("ObjectLockRetainUntilDate") == until,
          "HEAD shows the retention")
    check(error_code(lambda: s3.delete_object(Bucket=bucket, Key="doc", VersionId=v)) == "AccessDenied",
          "a retained version is refused deletion")
    res = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": "doc", "VersionId": v}]})
    check([e["Code"] for e in res.get("Errors", [])] == ["AccessDenied"], "delete_objects refuses the retained version")
    check(error_code(lambda: s3.put_object_retention(Bucket=bucket, Key="doc", VersionId=v, Retention={
        "Mode": "GOVERNANCE", "RetainUntilDate": until - datetime.timedelta(minutes=10)})) == "AccessDenied",
        "retention not shortened without bypass")

    h = s3.put_object(Bucket=bucket, Key="held", Body=b"held")["VersionId"]
    s3.put_object_legal_hold(Bucket=bucket, Key="held", VersionId=h, LegalHold={"Status": "ON"})
    check(s3.get_object_legal_hold(Bucket=bucket, Key="held", VersionId=h)["LegalHold"]["Status"] == "ON", "legal hold on")
    check(error_code(lambda: s3.delete_object(Bucket=bucket, Key="held", VersionId=h, BypassGovernanceRetention=True))
          == "AccessDenied", "a held version is refused deletion, bypass or not")
    s3.put_object_legal_hold(Bucket=bucket, Key="held", VersionId=h, LegalHold={"Status": "OFF"})
    s3.delete_object(Bucket=bucket, Key="held", VersionId=h)
    check(not s3.list_object_versions(Bucket=bucket, Prefix="held").get("Versions"), "released version deleted")

    s3.put_object_lock_configuration(Bucket=bucket, ObjectLockConfiguration={
        "ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}}})
    rule = s3.get_object_lock_configuration(Bucket=bucket)["ObjectLockConfiguration"]["Rule"]["DefaultRetention"]
    check(rule == {"Mode": "GOVERNANCE", "Days": 1}, "default retention read back: %s" % rule)
    d = s3.put_object(Bucket=bucket, Key="defaulted", Body=b"x")["VersionId"]
    check(s3.get_object_retention(Bucket=bucket, Key="defaulted", VersionId=d)["Retention"]["Mode"] == "GOVERNANCE",
          "the default retention applies")

    plain = "boto3-unlocked"
    s3.create_bucket(Bucket=plain)
    check(error_code(lambda: s3.get_object_lock_configuration(Bucket=plain)) == "ObjectLockConfigurationNotFoundError",
          "a plain bucket has no lock configuration")
    check(error_code(lambda: s3.put_object(Bucket=plain, Key="k", Body=b"x", ObjectLockLegalHoldStatus="ON"))
          == "InvalidRequest", "lock headers refused in a plain bucket")
    lock_conf = {"ObjectLockEnabled": "Enabled", "Rule": {"DefaultRetention": {"Mode": "GOVERNANCE", "Days": 1}}}
    check(error_code(lambda: s3.put_object_lock_configuration(Bucket=plain, ObjectLockConfiguration=lock_conf))
          == "InvalidBucketState", "object lock refused for an unversioned bucket")
    s3.put_bucket_versioning(Bucket=plain, VersioningConfiguration={"Status": "Enabled"})
    s3.put_object_lock_configuration(Bucket=plain, ObjectLockConfiguration=lock_conf)
    conf = s3.get_object_lock_configuration(Bucket=plain)["ObjectLockConfiguration"]
    check(conf["ObjectLockEnabled"] == "Enabled" and conf["Rule"]["DefaultRetention"]["Days"] == 1,
          "object lock turned on for a versioned bucket: %s" % conf)
    s3.delete_bucket(Bucket=plain)

    objs = [{"Key": o["Key"], "VersionId": o["VersionId"]} for o in s3.list_object_versions(Bucket=bucket).get("Versions", [])]
    res = s3.delete_objects(Bucket=bucket, BypassGovernanceRetention=True, Delete={"Objects": objs, "Quiet": True})
    check(not res.get("Errors"), "the owner removes GOVERNANCE versions with the bypass")
    s3.delete_bucket(Bucket=bucket)


def main():
    endpoint, work = sys.argv[1], sys.argv[2]
    s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                      config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}))
    bucket = "boto3"
    s3.create_bucket(Bucket=bucket)
    check(bucket in [b["Name"] for b in s3.list_buckets()["Buckets"]], "bucket listed")

    mid = os.path.join(work, "mid.bin")
    cfg = TransferConfig(multipart_threshold=8 << 20, multipart_chunksize=8 << 20)
    s3.upload_file(mid, bucket, "dir/mid.bin", Config=cfg)
    head = s3.head_object(Bucket=bucket, Key="dir/mid.bin")
    check(head["ETag"].strip('"').endswith("-5"), "multipart ETag has -5: " + head["ETag"])
    out = os.path.join(work, "boto3-mid.out")
    s3.download_file(bucket, "dir/mid.bin", out, Config=cfg)
    check(digest(out) == digest(mid), "multipart round trip byte-identical")

    rng = s3.get_object(Bucket=bucket, Key="dir/mid.bin", Range="bytes=8388600-8388615")["Body"].read()
    with open(mid, "rb") as f:
        f.seek(8388600)
        check(rng == f.read(16), "range across a part boundary")

    s3.copy_object(Bucket=bucket, Key="copy.bin", CopySource={"Bucket": bucket, "Key": "dir/mid.bin"})
    check(s3.head_object(Bucket=bucket, Key="copy.bin")["ContentLength"] == os.path.getsize(mid), "copy_object")

    keys = ["many/k%03d" % i for i in range(25)]
    for k in keys:
        s3.put_object(Bucket=bucket, Key=k, Body=k.encode())
    pages = s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="many/", PaginationConfig={"PageSize": 7})
    listed = [o["Key"] for p in pages for o in p.get("Contents", [])]
    check(listed == keys, "paginated listing of 25 keys in pages of 7")

    res = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k} for k in keys]})
    check(len(res.get("Deleted", [])) == 25 and not res.get("Errors"), "delete_objects")
    check(s3.list_objects_v2(Bucket=bucket, Prefix="many/")["KeyCount"] == 0, "deleted keys gone")

    url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": "copy.bin"}, ExpiresIn=300)
    with urllib.request.urlopen(url) as r:
        check(hashlib.sha256(r.read()).hexdigest() == digest(mid), "presigned GET")

    s3.put_object(Bucket=bucket, Key="once", Body=b"1", IfNoneMatch="*")
    check(error_code(lambda: s3.put_object(Bucket=bucket, Key="once", Body=b"2", IfNoneMatch="*")) == "PreconditionFailed",
          "conditional put refuses to overwrite")

    s3.put_object(Bucket=bucket, Key="summed", Body=b"hello", ChecksumAlgorithm="SHA256")
    h = s3.head_object(Bucket=bucket, Key="summed", ChecksumMode="ENABLED")
    check(h.get("ChecksumSHA256") == "LPJNul+wow4m6DsqxbninhsWHlwfp0JecwQzYpOLmCQ=", "SHA256 checksum stored and returned")

    check(error_code(lambda: s3.get_object(Bucket=bucket, Key="missing")) == "NoSuchKey", "NoSuchKey")

    # One PUT with a whole-object checksum, downloaded in ranged parts that
    # boto3 validates against any checksum the server returns.
    with open(mid, "rb") as f:
        s3.put_object(Bucket=bucket, Key="single.bin", Body=f, ChecksumAlgorithm="CRC32")
    out = os.path.join(work, "boto3-single.out")
    s3.download_file(bucket, "single.bin", out, Config=cfg)
    check(digest(out) == digest(mid), "checksummed single PUT read back in ranged parts")
    part = s3.get_object(Bucket=bucket, Key="dir/mid.bin", PartNumber=2)
    with open(mid, "rb") as f:
        f.seek(8 << 20)
        want = f.read(8 << 20)
    check(part["Body"].read() == want and part["PartsCount"] == 5, "GET part 2 of 5")

    compat(s3, endpoint, bucket)

    tagging(s3, bucket)
    cors(s3, endpoint, bucket)
    policy(s3, endpoint, bucket)
    prefix_rights(s3, endpoint, work)
    encryption(s3, bucket)
    versioning(s3)
    object_lock(s3)

    put_url = s3.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": "presigned-put"}, ExpiresIn=300)
    with urllib.request.urlopen(urllib.request.Request(put_url, data=b"via presigned PUT", method="PUT")) as r:
        check(r.status == 200, "presigned PUT")
    check(s3.get_object(Bucket=bucket, Key="presigned-put")["Body"].read() == b"via presigned PUT", "presigned PUT stored")

    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        objs = [{"Key": o["Key"]} for o in page.get("Contents", [])]
        if objs:
            s3.delete_objects(Bucket=bucket, Delete={"Objects": objs, "Quiet": True})
    s3.delete_bucket(Bucket=bucket)
    print("boto3 scenario passed")


if __name__ == "__main__":
    main()
