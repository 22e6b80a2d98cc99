package s3policy

// knownActions are the S3 action names a policy may name (without the
// "s3:" prefix). Naming one regen has no operation for (say
// PutLifecycleConfiguration) is accepted: there is nothing for it to
// allow or deny. A name outside this list is a typo or not S3's, and
// refused.
var knownActions = []string{
	"AbortMultipartUpload", "BypassGovernanceRetention", "CreateBucket", "DeleteBucket", "DeleteBucketOwnershipControls",
	"DeleteBucketPolicy", "DeleteBucketWebsite", "DeleteObject", "DeleteObjectTagging", "DeleteObjectVersion",
	"DeleteObjectVersionTagging", "GetAccelerateConfiguration", "GetAnalyticsConfiguration", "GetBucketAcl",
	"GetBucketCORS", "GetBucketLocation", "GetBucketLogging", "GetBucketNotification", "GetBucketObjectLockConfiguration",
	"GetBucketOwnershipControls", "GetBucketPolicy", "GetBucketPolicyStatus", "GetBucketPublicAccessBlock",
	"GetBucketRequestPayment", "GetBucketTagging", "GetBucketVersioning", "GetBucketWebsite", "GetEncryptionConfiguration",
	"GetInventoryConfiguration", "GetLifecycleConfiguration", "GetMetricsConfiguration", "GetObject", "GetObjectAcl",
	"GetObjectAttributes", "GetObjectLegalHold", "GetObjectRetention", "GetObjectTagging", "GetObjectTorrent",
	"GetObjectVersion", "GetObjectVersionAcl", "GetObjectVersionAttributes", "GetObjectVersionTagging",
	"GetObjectVersionTorrent", "GetReplicationConfiguration", "ListAllMyBuckets", "ListBucket",
	"ListBucketMultipartUploads", "ListBucketVersions", "ListMultipartUploadParts", "PutAccelerateConfiguration",
	"PutAnalyticsConfiguration", "PutBucketAcl", "PutBucketCORS", "PutBucketLogging", "PutBucketNotification",
	"PutBucketObjectLockConfiguration", "PutBucketOwnershipControls", "PutBucketPolicy", "PutBucketPublicAccessBlock",
	"PutBucketRequestPayment", "PutBucketTagging", "PutBucketVersioning", "PutBucketWebsite", "PutEncryptionConfiguration",
	"PutInventoryConfiguration", "PutLifecycleConfiguration", "PutMetricsConfiguration", "PutObject", "PutObjectAcl",
	"PutObjectLegalHold", "PutObjectRetention", "PutObjectTagging", "PutObjectVersionAcl", "PutObjectVersionTagging",
	"PutReplicationConfiguration", "ReplicateDelete", "ReplicateObject", "ReplicateTags", "RestoreObject",
}
