package gateway

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Object keys as S3 defines them: UTF-8, at most 1024 bytes (bytes, not
// characters). regen refuses a key that is not valid UTF-8 with 400
// InvalidURI, as S3 does, rather than storing a replacement: manifests are
// JSON, which would turn every invalid byte into U+FFFD, so "x\xff" and
// "x\xfe" would silently become one object that neither name finds.
//
// It also refuses keys holding a character XML 1.0 cannot carry (the C0
// controls but TAB, LF and CR, and U+FFFE, U+FFFF), everywhere: PUT,
// GET, HEAD, DELETE, copy sources, multipart uploads and listing
// parameters. A listing without encoding-type=url could only show such a
// key altered, so a client could never find, by listing, the object it
// stored. Refusing them all the same way keeps PUT, GET, LIST and DELETE
// consistent: such a key never names an object. (DeleteObjects keys
// arrive in XML, whose parser already refuses them: MalformedXML.)

// checkKey applies the rules above to an object key.
func checkKey(key string) error {
	if len(key) > maxKeyLen {
		return ErrKeyTooLong.Withf("Your key is too long: %d bytes, the limit is %d.", len(key), maxKeyLen)
	}
	return checkKeyText("Object key", key)
}

// checkKeyText refuses text that cannot be (part of) a key: invalid UTF-8
// or characters XML cannot carry. what names the text in the message.
func checkKeyText(what, s string) error {
	if !utf8.ValidString(s) {
		return ErrInvalidURI.With(what + " is not valid UTF-8.")
	}
	if i := strings.IndexFunc(s, xmlIllegal); i >= 0 {
		r, _ := utf8.DecodeRuneInString(s[i:])
		return ErrInvalidURI.With(fmt.Sprintf("%s contains U+%04X, a character S3 XML cannot carry.", what, r))
	}
	return nil
}

// xmlIllegal reports runes XML 1.0 cannot hold, even escaped.
func xmlIllegal(r rune) bool {
	return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0xFFFE || r == 0xFFFF
}

// listKeyParams are the query parameters that carry keys or key parts.
var listKeyParams = []string{"prefix", "delimiter", "marker", "start-after", "key-marker"}

// checkListParams applies checkKeyText to a listing's key parameters.
func checkListParams(req *request) error {
	for _, p := range listKeyParams {
		if err := checkKeyText("The "+p+" parameter", req.query.Get(p)); err != nil {
			return err
		}
	}
	return nil
}
