package bench

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
)

func wellFormedXML(data []byte) error {
	d := xml.NewDecoder(bytes.NewReader(data))
	for {
		_, err := d.Token()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}
