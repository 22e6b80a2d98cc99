package gateway

import (
	"bytes"
	"encoding/xml"
	"strconv"
	"time"
)

// Listing responses are written by hand: encoding/xml walks every field of
// every entry by reflection, which cost more CPU than the rest of a
// 1,000-key page in the gateway. The output is byte for byte what
// xml.Marshal writes for the same value (TestListXMLMatchesMarshal), so
// the struct tags stay the definition of the document.

// xmlAppender is a response that writes its own XML (see EncodeXML).
type xmlAppender interface {
	appendXML(dst []byte) []byte
}

const listRootOpen = `<ListBucketResult xmlns="` + S3Namespace + `">`

func (o ListObjectsV2Output) appendXML(b []byte) []byte {
	b = append(b, listRootOpen...)
	b = xmlElem(b, "Name", o.Name)
	b = xmlElem(b, "Prefix", o.Prefix)
	b = xmlElemOmit(b, "Delimiter", o.Delimiter)
	b = xmlInt(b, "MaxKeys", int64(o.MaxKeys))
	b = xmlInt(b, "KeyCount", int64(o.KeyCount))
	b = xmlBool(b, "IsTruncated", o.IsTruncated)
	b = xmlElemOmit(b, "EncodingType", o.EncodingType)
	b = xmlElemOmit(b, "ContinuationToken", o.ContinuationToken)
	b = xmlElemOmit(b, "NextContinuationToken", o.NextContinuationToken)
	b = xmlElemOmit(b, "StartAfter", o.StartAfter)
	b = appendContents(b, o.Contents)
	b = appendPrefixes(b, o.CommonPrefixes)
	return append(b, "</ListBucketResult>"...)
}

func (o ListObjectsV1Output) appendXML(b []byte) []byte {
	b = append(b, listRootOpen...)
	b = xmlElem(b, "Name", o.Name)
	b = xmlElem(b, "Prefix", o.Prefix)
	b = xmlElem(b, "Marker", o.Marker)
	b = xmlElemOmit(b, "NextMarker", o.NextMarker)
	b = xmlElemOmit(b, "Delimiter", o.Delimiter)
	b = xmlInt(b, "MaxKeys", int64(o.MaxKeys))
	b = xmlBool(b, "IsTruncated", o.IsTruncated)
	b = xmlElemOmit(b, "EncodingType", o.EncodingType)
	b = appendContents(b, o.Contents)
	b = appendPrefixes(b, o.CommonPrefixes)
	return append(b, "</ListBucketResult>"...)
}

func appendContents(b []byte, es []ObjectEntry) []byte {
	for i := range es {
		e := &es[i]
		b = append(b, "<Contents>"...)
		b = xmlElem(b, "Key", e.Key)
		b = append(b, "<LastModified>"...)
		b = time.Time(e.LastModified).UTC().AppendFormat(b, timestampLayout)
		b = append(b, "</LastModified>"...)
		b = xmlElem(b, "ETag", e.ETag)
		for _, a := range e.ChecksumAlgorithm {
			b = xmlElemOmit(b, "ChecksumAlgorithm", a) // omitempty applies to each element
		}
		b = xmlInt(b, "Size", e.Size)
		b = xmlElem(b, "StorageClass", e.StorageClass)
		if e.Owner != nil {
			b = append(b, "<Owner>"...)
			b = xmlElem(b, "ID", e.Owner.ID)
			b = xmlElemOmit(b, "DisplayName", e.Owner.DisplayName)
			b = append(b, "</Owner>"...)
		}
		b = append(b, "</Contents>"...)
	}
	return b
}

func appendPrefixes(b []byte, ps []PrefixEntry) []byte {
	for _, p := range ps {
		b = append(b, "<CommonPrefixes>"...)
		b = xmlElem(b, "Prefix", p.Prefix)
		b = append(b, "</CommonPrefixes>"...)
	}
	return b
}

// xmlElem appends <name>text</name>, text escaped as xml.Marshal does.
func xmlElem(b []byte, name, text string) []byte {
	b = append(b, '<')
	b = append(b, name...)
	b = append(b, '>')
	b = xmlText(b, text)
	b = append(b, "</"...)
	b = append(b, name...)
	return append(b, '>')
}

// xmlElemOmit is xmlElem for an omitempty field.
func xmlElemOmit(b []byte, name, text string) []byte {
	if text == "" {
		return b
	}
	return xmlElem(b, name, text)
}

func xmlInt(b []byte, name string, v int64) []byte {
	b = append(b, '<')
	b = append(b, name...)
	b = append(b, '>')
	b = strconv.AppendInt(b, v, 10)
	b = append(b, "</"...)
	b = append(b, name...)
	return append(b, '>')
}

func xmlBool(b []byte, name string, v bool) []byte {
	b = append(b, '<')
	b = append(b, name...)
	b = append(b, '>')
	b = strconv.AppendBool(b, v)
	b = append(b, "</"...)
	b = append(b, name...)
	return append(b, '>')
}

// xmlText appends s escaped as character data. Plain ASCII (nearly every
// key) is copied; anything else goes through xml.EscapeText, which is
// what xml.Marshal uses (it also replaces invalid UTF-8 and characters
// XML cannot carry).
func xmlText(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20, c >= 0x80, c == '&', c == '<', c == '>', c == '"', c == '\'':
			var buf bytes.Buffer
			_ = xml.EscapeText(&buf, []byte(s)) // a bytes.Buffer never fails
			return append(b, buf.Bytes()...)
		}
	}
	return append(b, s...)
}
