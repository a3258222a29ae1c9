package fast_test

import (
	"errors"
	"fmt"
	"log"

	"github.com/tickwire/tickwire/fast"
)

const exampleTemplates = `<templates xmlns="http://www.fixprotocol.org/ns/fast/td/1.1">
  <template name="Trade" id="7">
    <uInt32 name="Seq"><increment/></uInt32>
    <string name="Symbol"><copy/></string>
    <decimal name="Price"><exponent><copy value="-2"/></exponent><mantissa><delta/></mantissa></decimal>
    <uInt64 name="Qty"/>
  </template>
</templates>`

// Encode two messages, then decode the stream: the second message is
// smaller because copy, increment and delta send only what changed.
func Example() {
	ts, err := fast.ParseTemplates([]byte(exampleTemplates))
	if err != nil {
		log.Fatal(err)
	}
	trade, _ := ts.ByID(7)
	enc, _ := fast.NewEncoder(ts, &fast.EncoderOptions{OmitRepeatedTemplateID: true})
	var m fast.Message
	var stream []byte
	for i, px := range []int64{12345, 12350} {
		m.SetTemplate(trade)
		m.AddUint(uint64(100 + i))
		m.AddBytes([]byte("600000"))
		m.AddDecimal(px, -2)
		m.AddUint(300)
		stream, err = enc.Encode(stream, &m)
		if err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("%d bytes\n", len(stream))

	dec, _ := fast.NewDecoder(ts, nil)
	for off := 0; off < len(stream); {
		n, err := dec.Decode(stream[off:], &m)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d bytes: %s\n", n, m.AppendJSON(nil))
		off += n
	}
	// Output:
	// 18 bytes
	// 14 bytes: {"template":7,"name":"Trade","fields":{"Seq":100,"Symbol":"600000","Price":"123.45","Qty":300}}
	// 4 bytes: {"template":7,"name":"Trade","fields":{"Seq":101,"Symbol":"600000","Price":"123.50","Qty":300}}
}

// A message cut by the end of the buffer is "need more bytes": wait for the
// rest and decode it again from its start.
func ExampleDecoder_Decode_needMoreBytes() {
	ts, _ := fast.ParseTemplates([]byte(exampleTemplates))
	dec, _ := fast.NewDecoder(ts, nil)
	msg := []byte{0xf0, 0x87, 0xe4, 0x36, 0x30, 0x30, 0x30, 0x30, 0xb0, 0x00, 0x60, 0xb9, 0x02, 0xac}
	var m fast.Message
	_, err := dec.Decode(msg[:6], &m)
	fmt.Println(errors.Is(err, fast.ErrShort), fast.Code(err))
	n, err := dec.Decode(msg, &m)
	fmt.Println(n, err, m.Get("Qty").Uint())
	// Output:
	// true SHORT
	// 14 <nil> 300
}

// Walk a decoded message: composite values record the end of their subtree.
func ExampleMessage_Values() {
	ts, _ := fast.ParseTemplates([]byte(`<templates>
	  <template name="Book" id="1">
	    <uInt32 name="Seq"/>
	    <sequence name="Levels"><length name="N"/><uInt32 name="Px"/><uInt32 name="Qty"/></sequence>
	    <string name="Venue"/>
	  </template></templates>`))
	dec, _ := fast.NewDecoder(ts, nil)
	var m fast.Message
	if _, err := dec.Decode([]byte{0xc0, 0x81, 0x85, 0x82, 0x8a, 0x81, 0x8b, 0x82, 0xd8}, &m); err != nil {
		log.Fatal(err)
	}
	for i := 0; i < len(m.Values); i = int(m.Values[i].End) {
		fmt.Println(m.Field(i).Name, m.Values[i].Kind, m.Values[i].End-int32(i))
	}
	// Output:
	// Seq uInt32 1
	// Levels sequence 7
	// Venue string 1
}

// Read a sequence's elements and a group's fields by name, without index
// arithmetic.
func ExampleMessage_Elements() {
	ts, _ := fast.ParseTemplates([]byte(`<templates>
	  <template name="Book" id="1">
	    <sequence name="Levels"><length name="N"/>
	      <uInt32 name="Px"/><uInt32 name="Qty"/>
	      <group name="Src" presence="optional"><string name="Venue"/></group>
	    </sequence>
	  </template></templates>`))
	book, _ := ts.ByID(1)
	var m fast.Message
	m.SetTemplate(book)
	m.AddSequence(2)
	m.AddElement()
	m.AddUint(10)
	m.AddUint(1)
	m.AddGroup()
	m.AddBytes([]byte("XSHG"))
	m.AddElement()
	m.AddUint(11)
	m.AddUint(2)
	m.AddAbsent()
	enc, _ := fast.NewEncoder(ts, nil)
	b, err := enc.Encode(nil, &m)
	if err != nil {
		log.Fatal(err)
	}

	dec, _ := fast.NewDecoder(ts, nil)
	if _, err := dec.Decode(b, &m); err != nil {
		log.Fatal(err)
	}
	for k, e := range m.Elements(m.Index("Levels")) {
		venue := "-"
		if v := m.IndexIn(m.IndexIn(e, "Src"), "Venue"); v >= 0 {
			venue = string(m.Bytes(v))
		}
		fmt.Println(k, m.GetIn(e, "Px").Uint(), m.GetIn(e, "Qty").Uint(), venue)
	}
	// Output:
	// 0 10 1 XSHG
	// 1 11 2 -
}

// The Encoder refuses a value the field's type does not take, naming the
// template, the field, what it takes and what it was given.
func ExampleEncodeError() {
	ts, _ := fast.ParseTemplates([]byte(exampleTemplates))
	trade, _ := ts.ByID(7)
	enc, _ := fast.NewEncoder(ts, nil)
	var m fast.Message
	for _, qty := range []func(){
		func() { m.AddBytes([]byte("300")) },
		func() { m.AddInt(-300) },
	} {
		m.SetTemplate(trade)
		m.AddUint(100)
		m.AddBytes([]byte("600000"))
		m.AddDecimal(12345, -2)
		qty()
		_, err := enc.Encode(nil, &m)
		fmt.Println(err)
		var ee *fast.EncodeError
		if errors.As(err, &ee) {
			fmt.Printf("field %s, wrong kind %v, out of range %v\n",
				ee.Field, errors.Is(err, fast.ErrWrongKind), errors.Is(err, fast.ErrRange))
		}
		enc.Reset()
	}
	// Output:
	// fast: template Trade (id 7), field Qty: value of the wrong kind for its field: want uInt64 (AddUint or AddInt), got bytes "300" (AddBytes)
	// field Qty, wrong kind true, out of range false
	// fast: template Trade (id 7), field Qty: -300 out of range for uInt64
	// field Qty, wrong kind false, out of range true
}

// A malformed template file names the line and the element.
func ExampleParseTemplates_error() {
	_, err := fast.ParseTemplates([]byte("<templates>\n<template name=\"T\">\n<uInt32 name=\"X\"><tail/></uInt32>\n</template></templates>"))
	fmt.Println(err)
	// Output:
	// fast: templates line 3 <uInt32 name="X">: tail on a uInt32 field (S2)
}

// The wire primitives decode one value at an offset and return the next
// offset; generated decoders call them directly.
func ExampleReadUint32() {
	b := fast.AppendUint32(nil, 942234)
	b = fast.AppendNullableInt32(b, -1, true)
	v, off, _ := fast.ReadUint32(b, 0)
	i, present, off, _ := fast.ReadNullableInt32(b, off)
	fmt.Printf("% x | %d %d %v %d\n", b, v, i, present, off)
	// Output:
	// 39 41 9a ff | 942234 -1 true 4
}
