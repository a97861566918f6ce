"""Regenerate the sample PDFs and requests from the texts in this script, `documents/` and `invoices/`.

Run from anywhere with the project's interpreter: `.venv/bin/python samples/make_samples.py`. Output is
byte-for-byte reproducible.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fpdf import FPDF

HERE = Path(__file__).resolve().parent
DOCUMENTS = HERE / "documents"
INVOICES = HERE / "invoices"
CREATED = datetime(2025, 3, 1, 9, 0, 0, tzinfo=UTC)
QUESTION = "What are the main risks in these contracts, e.g. liability caps, termination and data protection?"
INLINE_DOCUMENTS = (
    ("data_processing_addendum.md", "text/markdown"),
    ("supplier_letter.txt", "text/plain"),
)

# Each page is a list of (heading, paragraphs). Core PDF fonts only cover latin-1: keep to ASCII quotes.
MSA_PAGES: list[list[tuple[str, list[str]]]] = [
    [
        (
            "MASTER SERVICES AGREEMENT",
            [
                "This Master Services Agreement (the Agreement) is made on 1 February 2025 between "
                "Northwind Analytics Ltd (the Supplier) and Contoso Retail plc (the Customer).",
            ],
        ),
        (
            "2. Services",
            [
                "2.1 The Supplier shall provide the hosted analytics services described in Schedule 1 "
                "(the Services) with reasonable skill and care.",
                "2.2 The Supplier may change the Services at any time provided that the change does not "
                "materially reduce their functionality.",
            ],
        ),
        (
            "3. Fees and payment",
            [
                "3.1 The Customer shall pay the Fees set out in Schedule 2 within 30 days of the date of each invoice.",
                "3.2 Late payments bear interest at 4% per year above the Bank of England base rate.",
                "3.3 The Supplier may suspend the Services if an undisputed invoice remains unpaid for "
                "more than 45 days after its due date.",
                "3.4 The Supplier may increase the Fees once in each contract year on 60 days' notice.",
            ],
        ),
    ],
    [
        (
            "8. Limitation of liability",
            [
                "8.1 Neither party limits or excludes its liability for death or personal injury caused "
                "by its negligence, or for fraud.",
                "8.2 Subject to clause 8.1, each party's total aggregate liability arising under or in "
                "connection with this Agreement shall not exceed the Fees paid by the Customer in the "
                "twelve months preceding the event giving rise to the claim.",
                "8.3 Neither party shall be liable for any loss of profits, revenue or data, or for any "
                "indirect or consequential loss.",
                "8.4 The liability cap in clause 8.2 does not apply to the Customer's obligation to pay the Fees.",
            ],
        ),
        (
            "9. Indemnities",
            [
                "9.1 The Supplier shall indemnify the Customer against third-party claims that the "
                "Services infringe intellectual property rights. The Supplier's liability under this "
                "indemnity is capped at two times the annual Fees.",
            ],
        ),
    ],
    [
        (
            "12. Term and termination",
            [
                "12.1 The Agreement has an initial term of 36 months and then renews automatically for "
                "successive periods of 12 months unless either party gives at least 90 days' written "
                "notice of non-renewal before the end of the then-current term.",
                "12.2 Either party may terminate the Agreement by written notice if the other party "
                "commits a material breach that is not remedied within 30 days of notice.",
                "12.3 The Customer may terminate the Agreement for convenience on 180 days' notice, "
                "subject to an early termination fee equal to 50% of the Fees for the remainder of the "
                "initial term.",
            ],
        ),
        (
            "14. Data protection",
            [
                "14.1 Each party shall comply with the Data Protection Laws. The Supplier shall process "
                "Personal Data only as set out in the Data Processing Addendum.",
            ],
        ),
        (
            "15. Governing law",
            ["15.1 This Agreement is governed by the laws of England and Wales."],
        ),
    ],
]

SCHEDULE_PAGE: list[tuple[str, list[str]]] = [
    (
        "SCHEDULE 3 - SERVICE LEVELS AND SERVICE CREDITS",
        [
            "1. The Supplier shall make the platform available 99.5% of the time in each calendar month, "
            "excluding scheduled maintenance.",
            "2. If availability falls below the target, the Customer is entitled to a service credit of 2% "
            "of the monthly Fees for each full 0.5% shortfall.",
            "3. Service credits are capped at 10% of the monthly Fees and are the Customer's sole and "
            "exclusive remedy for any failure to meet the availability target.",
            "The signed signature page follows as a scanned image.",
        ],
    )
]


# Invoices printed to PDF, one list of lines per page. A monospaced font keeps the columns aligned in the text
# that PDF extraction gives back. Core PDF fonts only cover latin-1: no euro sign here.
INVOICE_PDFS: dict[str, list[list[str]]] = {
    "inv_03_cobalt.pdf": [
        [
            "COBALT TECHNICAL SERVICES INC.",
            "Seller: Cobalt Technical Services Inc.",
            "Invoice # CTS-1108",
            "Invoice date: March 12, 2025",
            "",
            "Item #      Qty   Description                        Rate      Ext. Price",
            "NW-5000      12   Installation labour (per hour)   $95.00      $1,140.00",
            "NW-5100       1   Site survey (fixed fee)         $350.00        $350.00",
            "",
            "Subtotal                                                       $1,490.00",
            "Sales tax (0%)                                                     $0.00",
            "Total due                                                      $1,490.00",
        ]
    ],
    "inv_04_delta.pdf": [
        [
            "DELTA INDUSTRIAL DISTRIBUTION",
            "Vendor: Delta Industrial Distribution Co.",
            "Invoice Number: DID-55102",
            "Invoice Date: 03/18/2025",
            "Currency: USD",
            "",
            "SKU        Description                      Quantity   Unit Price    Line Total",
            "NW-1002    Steel bracket, 60 mm                  100         5.90        590.00",
            "NW-2020    Hex nut M8 (box of 100)                10         9.60         96.00",
            "NW-2010    Hex bolt M8 x 40 (box of 100)          10        18.40        184.00",
            "",
            "                                                     continued on page 2",
        ],
        [
            "DELTA INDUSTRIAL DISTRIBUTION - Invoice DID-55102 - page 2",
            "",
            "NW-4100    LED panel 600 x 600                     4        64.99        259.96",
            "NW-4200    LED driver 40 W                         4        19.99         79.96",
            "",
            "Subtotal                                                              1,209.92",
            "Discount (volume)                                                      (50.00)",
            "Sales Tax 6%                                                             69.60",
            "TOTAL                                                                 1,239.52",
        ],
    ],
}
INLINE_INVOICES = (
    "inv_01_northwind.txt",
    "inv_02_brightline.md",
    "inv_05_eagle.txt",
    "inv_06_falcon.txt",
    "inv_07_granite.txt",
)
CONTRACT = "contract_price_list.txt"


def _new_pdf(title: str) -> FPDF:
    pdf = FPDF(format="A4")
    pdf.set_creation_date(CREATED)
    pdf.set_title(title)
    pdf.set_author("Longhaul samples")
    pdf.set_auto_page_break(auto=True, margin=20)
    pdf.set_margins(20, 20, 20)
    return pdf


def _write_page(pdf: FPDF, sections: list[tuple[str, list[str]]]) -> None:
    pdf.add_page()
    for heading, paragraphs in sections:
        pdf.set_font("Helvetica", style="B", size=12)
        pdf.multi_cell(0, 7, heading, new_x="LMARGIN", new_y="NEXT")
        pdf.ln(2)
        pdf.set_font("Helvetica", size=10.5)
        for paragraph in paragraphs:
            pdf.multi_cell(0, 5.5, paragraph, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
        pdf.ln(2)


def _scanned_page(pdf: FPDF) -> None:
    """A page with no text layer, like a scanned signature page: only drawn shapes."""
    pdf.add_page()
    pdf.set_draw_color(60, 60, 60)
    pdf.set_fill_color(235, 235, 235)
    pdf.rect(20, 20, 170, 250, style="DF")
    pdf.line(40, 220, 100, 220)
    pdf.line(120, 220, 180, 220)


# A lease amendment that exists only as scanned images: no text layer at all, so only OCR can read it.
SCANNED_PAGES: list[list[str]] = [
    [
        "LEASE AMENDMENT No. 2",
        "",
        "This amendment is made on 14 April 2025 between Harbourside",
        "Properties Ltd (the Landlord) and Contoso Retail plc (the Tenant)",
        "and amends the lease of Unit 7, Quayside Park, Bristol.",
        "",
        "1. Term",
        "The term of the lease is extended until 31 March 2031.",
        "",
        "2. Rent",
        "From 1 May 2025 the annual rent is 84,000 GBP, payable",
        "quarterly in advance on the usual quarter days.",
    ],
    [
        "3. Security deposit",
        "The Tenant shall pay a security deposit of 21,000 GBP.",
        "The Landlord shall return the deposit within 45 days",
        "after the end of the term, less any unpaid rent.",
        "",
        "4. Break clause",
        "The Tenant may end the lease on 31 March 2028 by giving",
        "at least nine months written notice to the Landlord.",
        "",
        "Signed for the Landlord: M. Okafor",
        "Signed for the Tenant: J. Lindqvist",
    ],
]
SCANNED_DPI = 150


def _scan(lines: list[str]) -> Any:
    """One A4 page as a greyscale image of typed lines, slightly blurred, as a scanner would give it."""
    from PIL import Image, ImageDraw, ImageFilter, ImageFont

    width, height = round(8.27 * SCANNED_DPI), round(11.69 * SCANNED_DPI)
    image = Image.new("L", (width, height), 250)
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=30)  # the FreeType font inside Pillow: the same glyphs everywhere
    y = 150
    for line in lines:
        if line:
            draw.text((130, y), line, fill=25, font=font)
        y += 52
    return image.filter(ImageFilter.GaussianBlur(0.6))


def make_scanned_amendment(path: Path) -> None:
    pdf = _new_pdf("Lease amendment No. 2 (scanned)")
    pdf.set_auto_page_break(auto=False)
    for lines in SCANNED_PAGES:
        pdf.add_page()
        pdf.image(_scan(lines), x=0, y=0, w=pdf.w, h=pdf.h)
    pdf.output(str(path))


def make_master_services_agreement(path: Path) -> None:
    pdf = _new_pdf("Master Services Agreement")
    for sections in MSA_PAGES:
        _write_page(pdf, sections)
    pdf.output(str(path))


def make_signed_schedule(path: Path) -> None:
    pdf = _new_pdf("Schedule 3 - Service Levels (signed)")
    _write_page(pdf, SCHEDULE_PAGE)
    _scanned_page(pdf)
    pdf.output(str(path))


def make_invoice_pdf(path: Path, pages: list[list[str]]) -> None:
    pdf = _new_pdf(f"Invoice {path.stem}")
    pdf.set_auto_page_break(auto=False)
    for lines in pages:
        pdf.add_page()
        pdf.set_font("Courier", size=9)
        for line in lines:
            pdf.cell(0, 4.5, line, new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))


def make_invoice_request(path: Path) -> None:
    """The inline-text invoices against the price list (the PDF invoices go through uploads)."""

    def document(name: str) -> dict[str, str]:
        return {"name": name, "text": (INVOICES / name).read_text(encoding="utf-8")}

    body = {
        "workflow": "invoice-reconciliation",
        "input": {"contract": document(CONTRACT), "invoices": [document(name) for name in INLINE_INVOICES]},
    }
    path.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def make_request(path: Path) -> None:
    documents = [
        {"name": name, "media_type": media_type, "text": (DOCUMENTS / name).read_text(encoding="utf-8")}
        for name, media_type in INLINE_DOCUMENTS
    ]
    body = {"workflow": "document-analysis", "input": {"question": QUESTION, "documents": documents}}
    path.write_text(json.dumps(body, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def main() -> None:
    make_master_services_agreement(DOCUMENTS / "master_services_agreement.pdf")
    make_signed_schedule(DOCUMENTS / "schedule_3_service_levels_signed.pdf")
    make_scanned_amendment(DOCUMENTS / "lease_amendment_scanned.pdf")
    make_request(HERE / "request.json")
    for name, pages in INVOICE_PDFS.items():
        make_invoice_pdf(INVOICES / name, pages)
    make_invoice_request(HERE / "invoice_request.json")


if __name__ == "__main__":
    main()
